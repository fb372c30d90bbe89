"""Every row of every fact table is found, in every wording programs and people write it.

A code the tool can explain (`postmortem explain`) must also be recognised by `analyze` wherever it
appears: the CUDA runtime and driver errors (by name, by number in context, by message), the
status codes of cuBLAS, cuDNN, cuFFT, cuSOLVER, cuSPARSE, cuRAND and NCCL, every Xid and SXid, and
the driver's NV_STATUS codes. The wordings are the shapes real logs use (each named below).
"""

from __future__ import annotations

import pytest

from postmortem import knowledge
from postmortem.pipeline import analyze_text

CUDA_WORDINGS = {
    # PyTorch's c10 check: "RuntimeError: CUDA error: an illegal memory access was encountered"
    "torch-message": lambda e: f"RuntimeError: CUDA error: {e.message}" if e.message else None,
    # c10 warning quoting the number and message (CUDAFunctions.cpp)
    "torch-warning": lambda e: (f"UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). "
                                f"Error {e.number}: {e.message} (Triggered internally at "
                                f"../c10/cuda/CUDAFunctions.cpp:108.)") if e.message else None,
    # the samples' checkCudaErrors / gpuErrchk: "code=2(cudaErrorMemoryAllocation)"
    "code-and-name": lambda e: (f"CUDA error at main.cu:42 code={e.number}({e.runtime_name}) \"cudaMalloc(&p, n)\""
                                if e.runtime_name else None),
    # a runtime name alone, as exceptions and loggers print it
    "runtime-name": lambda e: f"Check failed: {e.runtime_name} at kernel.cu:77" if e.runtime_name else None,
    # the driver API's enum name (JAX/XLA, CuPy, Numba)
    "driver-name": lambda e: (f"jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to launch CUDA kernel: "
                              f"{e.driver_name}" if e.driver_name else None),
    # Lua Torch / THC: "cuda runtime error (700) : <message>"
    "thc": lambda e: f"THCudaCheck FAIL file=/tmp/THC.cu line=66 error={e.number} : {e.message}" if e.message else None,
}


def _cuda_rows():
    for row in knowledge.cuda_errors():
        if row.number == 0:
            continue
        for wording, make in CUDA_WORDINGS.items():
            if (text := make(row)) is not None:
                yield pytest.param(row, text, id=f"{row.number}-{wording}")


@pytest.mark.parametrize(("row", "text"), list(_cuda_rows()))
def test_every_cuda_error_in_every_wording(row, text):
    events = analyze_text(text + "\n").events
    errors = {e.fields.get("error") for e in events if "error" in e.fields}
    assert row.name in errors or (row.message and any(e.fields.get("message") == row.message for e in events)), \
        [(e.kind, dict(e.fields)) for e in events]


LIBRARY_DISPLAY = {"cublas": "cuBLAS", "cudnn": "cuDNN", "cufft": "cuFFT", "cusolver": "cuSOLVER",
                   "cusparse": "cuSPARSE", "curand": "cuRAND", "cutensor": "cuTENSOR", "nvjpeg": "NVJPEG",
                   "nvrtc": "NVRTC"}
"""How each library's callers name it before a status number (NVENC's callers print the name, never the number
alone after the library's)."""


def _library_rows():
    for row in knowledge.library_statuses():
        if row.library == "nccl":
            yield pytest.param(row, f"RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, {row.name}", id=row.name)
            continue
        yield pytest.param(row, f"RuntimeError: {row.name} when calling `handle_create(&h)`", id=f"{row.name}-name")
        if row.library in LIBRARY_DISPLAY and (row.library != "cudnn" or
                                               row.version == ("9" if row.number >= 1000 else "8")):
            yield pytest.param(row, f"{LIBRARY_DISPLAY[row.library]} error {row.number} at ops.cu:375",
                               id=f"{row.name}-number")


@pytest.mark.parametrize(("row", "text"), list(_library_rows()))
def test_every_library_status_by_name_and_number(row, text):
    events = analyze_text(text + "\n").events
    found = {e.fields.get("status") or e.fields.get("result") for e in events}
    assert row.name in found, [(e.kind, dict(e.fields)) for e in events]


XID_LAYOUTS = {
    "dmesg": "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): {n}, pid=4242, name=python3, {m}",
    "syslog": "Sep 18 20:07:01 node7 kernel: NVRM: Xid (PCI:0000:3b:00): {n}, pid='<unknown>', name=<unknown>, {m}",
    "journal-quoted": "> 2024-09-18T20:07:01+0000 node7 kernel: NVRM: Xid (PCI:0000:3b:00): {n}, {m}",
    "kmsg": "6,3973,227996636,-;NVRM: Xid (PCI:0000:3b:00): {n}, {m}",
}


@pytest.mark.parametrize("layout", sorted(XID_LAYOUTS))
def test_every_xid_in_every_layout(layout):
    missing = []
    for xid in range(1, 200):
        if knowledge.xid(xid) is None:
            continue
        text = XID_LAYOUTS[layout].format(n=xid, m="Ch 00000010") + "\n"
        if not any(e.kind == "xid" and e.fields.get("xid") == xid for e in analyze_text(text).events):
            missing.append(xid)
    assert not missing


def test_every_sxid():
    missing = []
    for sxid in range(10000, 30000):
        if knowledge.sxid(sxid) is None:
            continue
        text = f"[ 88.1] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): {sxid}, Non-fatal, Link 32 error (First)\n"
        if not any(e.kind == "sxid" and e.fields.get("sxid") == sxid for e in analyze_text(text).events):
            missing.append(sxid)
    assert not missing


@pytest.mark.parametrize("status", list(knowledge.nv_statuses()), ids=lambda s: s.name)
def test_every_nv_status(status):
    # the open modules' NV_CHECK_OK: "Check failed: <message> [NV_ERR_X] (0x0000005F) returned from ..."
    text = (f"[ 77.5] NVRM: nvCheckOkFailedNoLog: Check failed: {status.message} [{status.name}] "
            f"(0x{status.value:08X}) returned from pRmApi->Control(pRmApi, "
            "hClient, hObject, cmd, pParams, paramsSize)\n")
    events = [e for e in analyze_text(text).events if e.kind == "driver-message"]
    assert events and events[0].fields.get("nv_status") == status.name


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in knowledge.cuda_errors() if r.cause],)
def test_a_cuda_error_the_table_gives_a_cause_is_a_finding_of_that_cause(row):
    """The table's cause column is the verdict: a row given a cause (CUDA_ERROR_INVALID_SOURCE -> arch-mismatch)
    that no signature matches would be an event with no finding."""
    report = analyze_text(f"RuntimeError: CUDA error: {row.name}: {row.message}\n")
    assert row.cause in {f.cause for f in report.findings}, [(f.signature, f.cause) for f in report.findings]
