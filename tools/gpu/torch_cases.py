"""PyTorch failures on a real GPU, for tools/capture_gpu.sh (issue 18).

Usage: python3 torch_cases.py CASE [LIB]   with CASE one of: oom, assert, illegal, flight.
Each case prints what PyTorch prints (the traceback goes to stderr, as a user's job shows it); `illegal` loads
LIB (a build of tests/data/fatbin/k.cu) and launches its out-of-bounds kernel; `flight` runs a one-rank NCCL group
and writes its flight-recorder dump, pickle and JSON, into the current directory.
"""

import ctypes
import os
import sys

import torch


def oom() -> None:
    """Asks for more memory than the GPU has, in one block."""
    total = torch.cuda.get_device_properties(0).total_memory
    torch.empty(int(total * 1.5) // 4, dtype=torch.float32, device="cuda")


def device_assert() -> None:
    """Indexes past the end of a GPU tensor: the index kernel's device-side assert."""
    table = torch.arange(10, device="cuda")
    index = torch.tensor([1, 2, 30], device="cuda")
    print(table[index].sum().item())


def illegal(lib_path: str) -> None:
    """Runs k.cu's launch(): a correct kernel, then one that stores far past its buffer."""
    lib = ctypes.CDLL(lib_path)
    x = torch.ones(1024, device="cuda")
    p = torch.zeros(512, dtype=torch.int32, device="cuda")
    lib.launch(ctypes.c_void_p(x.data_ptr()), ctypes.c_int(x.numel()), ctypes.c_void_p(p.data_ptr()))
    torch.cuda.synchronize()


def flight() -> None:
    """A one-rank NCCL group's collectives, then its flight recorder dumped as pickle and as JSON."""
    import torch.distributed as dist

    os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29571", rank=0, world_size=1)
    t = torch.ones(1 << 20, device="cuda")
    for _ in range(3):
        dist.all_reduce(t)
    dist.broadcast(t, 0)
    dist.barrier()
    torch.cuda.synchronize()
    c10d = torch._C._distributed_c10d
    with open("nccl_trace_rank_0", "wb") as f:
        f.write(c10d._dump_nccl_trace())
    with open("nccl_trace_rank_0.json", "w", encoding="utf-8") as f:
        f.write(c10d._dump_nccl_trace_json())
    dist.destroy_process_group()
    print("flight-recorder dumps written")


if __name__ == "__main__":
    case = sys.argv[1]
    if case == "oom":
        oom()
    elif case == "assert":
        device_assert()
    elif case == "illegal":
        illegal(sys.argv[2])
    elif case == "flight":
        flight()
    else:
        sys.exit(f"unknown case {case!r}")
