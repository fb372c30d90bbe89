"""Items 8 and 10: text that would grow memory or hide evidence (storms, endless lines, lone \\r, absurd times).

The writers here make the inputs the tools really produce (dmesg Xid lines, a tqdm bar, `nvidia-smi`
of a lost GPU), streamed in blocks so a few hundred MB take a second or two; benchmarks/bench_memory.py
writes the same inputs at the sizes the attack used. The bounds on CASES are what these runs measured,
with 2-3x margin.
"""

from __future__ import annotations

from pathlib import Path

from .harness import GiB, Hostile, Run

MiB = 1024 * 1024
XID13 = ("[{t:12.6f}] NVRM: Xid (PCI:0000:3b:00): 13, pid={pid}, name=python, Graphics SM Warp Exception on "
         "(GPC 1, TPC 0, SM 0): Out Of Range Address\n")
XID79 = "[{t:12.6f}] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus.\n"
CUDA = "RuntimeError: CUDA error: an illegal memory access was encountered"
LOST_GPU_ROW = ("|   5  ERR!                On   | 00000000:91:00.0 Off |                 ERR! |\n"
                "|ERR!  ERR! ERR!    ERR! / ERR! |      0MiB / 81920MiB |    ERR!      Default |\n"
                "|                               |                      |                 ERR! |\n")
SMI_BANNER = "| NVIDIA-SMI 535.129.03   Driver Version: 535.129.03   CUDA Version: 12.2     |\n"


def write_xid_storm(path: Path, size: int, distinct_pids: bool = False) -> None:
    """Xid 13 lines with rising uptimes (and, if asked, a new pid each) up to `size` bytes, then one Xid 79."""
    t, pid = 100.0, 4242
    with open(path, "w") as out:
        written = 0
        while written < size:
            block = []
            for _ in range(10_000):
                t += 0.000137
                pid += distinct_pids
                block.append(XID13.format(t=t, pid=pid))
            text = "".join(block)
            out.write(text)
            written += len(text)
        out.write(XID79.format(t=t + 1))


def write_progress_log(path: Path, size: int) -> None:
    """A tqdm bar redrawn with lone \\r only (no \\n at all), a CUDA error in the middle and an Xid at the end."""
    bar = "".join(f"\r 45%|####      | {i}/100000 [00:10<00:12, 45.0it/s, loss=0.{i:04d}]" for i in range(10_000))
    with open(path, "w") as out:
        written = 0
        while written < size:
            out.write(bar)
            written += len(bar)
            if written >= size // 2 > written - len(bar):
                out.write("\r" + CUDA)
        out.write("\r" + XID79.format(t=5.0).rstrip("\n"))


def write_long_line(path: Path, size: int) -> None:
    """One line of `NVRM: Xid ` repeated to `size` bytes, then a real Xid 79 line."""
    with open(path, "wb") as out:
        block = b"NVRM: Xid " * (MiB // 10)
        out.writelines(block for _ in range(size // len(block)))
        out.write(b"\n" + XID79.format(t=6.0).encode())


def write_err_lines(path: Path, lines: int) -> None:
    """`nvidia-smi` of a GPU that fell off the bus, its ERR! row printed `lines` / 3 times under one banner."""
    block = LOST_GPU_ROW * 10_000
    with open(path, "w") as out:
        out.write(SMI_BANNER)
        out.writelines(block for _ in range(lines // 30_000))


def write_absurd_times(path: Path) -> None:
    """Uptimes no kernel has, years at the calendar's edges with extreme offsets, around one real Xid 79."""
    path.write_text(
        "[99999999999999.999] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception: ESR\n"
        "2024-05-01T10:00:00+00:00 node1 kernel: [300000000000.5] NVRM: Xid (PCI:0000:3b:00): 31, pid=1, Ch 8\n"
        "9999-12-31T23:59:59-14:00 node1 kernel: [    5.000000] NVRM: Xid (PCI:0000:3b:00): 43, pid=1, Ch 8\n"
        "0001-01-01T00:00:00+14:00 node1 kernel: [    6.000000] NVRM: Xid (PCI:0000:3b:00): 45, pid=1, Ch 8\n"
        "2024-05-01T10:00:00+99:99 node1 kernel: [    7.000000] NVRM: Xid (PCI:0000:3b:00): 62, pid=1, x\n"
        "[Fri Dec 31 23:59:59 9999] NVRM: Xid (PCI:0000:3b:00): 119, pid=1, x\n"
        "[300000000000.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n")


def _storm(directory: Path) -> Run:
    write_xid_storm(directory / "dmesg.txt", 200 * MiB)
    return Run(["analyze", "dmesg.txt"], evidence=("Verdict: gpu-off-bus", "Xid 79", "Xid 13"))


def _storm_of_pids(directory: Path) -> Run:
    write_xid_storm(directory / "dmesg.txt", 50 * MiB, distinct_pids=True)
    return Run(["analyze", "dmesg.txt"], evidence=("Verdict: gpu-off-bus", "were not parsed"))


def _progress(directory: Path) -> Run:
    write_progress_log(directory / "train.log", 39 * MiB)
    return Run(["analyze", "train.log", "--format", "json"], evidence=("illegal memory access", "xid-79"))


def _long_line(directory: Path) -> Run:
    write_long_line(directory / "dmesg.txt", 20 * MiB)
    return Run(["analyze", "dmesg.txt", "--format", "json"], evidence=("xid-79", "longer than"))


def _err_lines(directory: Path) -> Run:
    write_err_lines(directory / "nvidia-smi.txt", 1_500_000)
    return Run(["analyze", "nvidia-smi.txt", "--format", "json"], evidence=("err_cells", "0000:91:00.0"))


def _absurd(directory: Path) -> Run:
    write_absurd_times(directory / "dmesg.txt")
    return Run(["analyze", "dmesg.txt", "--format", "markdown"], evidence=("Xid 79", "uptime of more than"))


CASES = [
    Hostile(8, "xid-storm-200mb", _storm, wall_s=30, address_space=GiB),
    Hostile(8, "xid-storm-of-new-pids-50mb", _storm_of_pids, wall_s=40, address_space=GiB),
    Hostile(8, "carriage-return-only-progress-log", _progress, wall_s=10, address_space=GiB),
    Hostile(8, "one-20mb-line-of-xid", _long_line, wall_s=15, address_space=GiB),
    Hostile(8, "1m5-err-lines-of-nvidia-smi", _err_lines, wall_s=45, address_space=GiB),
    Hostile(10, "absurd-uptimes-and-calendar-edges", _absurd, wall_s=10, address_space=GiB),
]
"""Measured (2-core machine shared with other work): peak RSS 73 / 120 / 69 / 145 / 89 / 70 MiB, wall
5-9 / 7-13 / 1 / 2-4 / 12-16 / 1 s; every case also passed under RLIMIT_AS of 768 MiB."""
