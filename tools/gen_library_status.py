#!/usr/bin/env python3
"""Write postmortem/data/library-status.tsv: every status code of the CUDA math and communication libraries.

cuBLAS, cuDNN (8 and 9 numberings) and NCCL come from the reference tables in tests/given/reference
(each row keeps its sources); cuFFT, cuSOLVER, cuSPARSE and cuRAND from NVIDIA's published enums
(nvmath-python's bindings document the values; cited per row); cuTENSOR, NVRTC, nvJPEG and NVENC from their
libraries' documentation and headers. `cause` is given only where the
status alone names one: an allocation failure is GPU memory, an architecture mismatch is the build.

usage: python3 tools/gen_library_status.py [--reference tests/given/reference] [--check]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from generated import write_or_check

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "postmortem" / "data" / "library-status.tsv"
NVMATH = "https://docs.nvidia.com/cuda/nvmath-python/0.1.0/bindings/generated/nvmath.bindings.{}.html"

PUBLISHED = {
    # library: (prefix, source page, [(number, suffix, cause)])
    "cufft": ("CUFFT_", NVMATH.format("cufft.Result"), [
        (1, "INVALID_PLAN", "-"), (2, "ALLOC_FAILED", "gpu-oom"), (3, "INVALID_TYPE", "-"), (4, "INVALID_VALUE", "-"),
        (5, "INTERNAL_ERROR", "library-failure"), (6, "EXEC_FAILED", "library-failure"),
        (7, "SETUP_FAILED", "library-failure"), (8, "INVALID_SIZE", "-"), (9, "UNALIGNED_DATA", "-"),
        (10, "INCOMPLETE_PARAMETER_LIST", "-"), (11, "INVALID_DEVICE", "-"), (12, "PARSE_ERROR", "-"),
        (13, "NO_WORKSPACE", "-"), (14, "NOT_IMPLEMENTED", "-"), (15, "LICENSE_ERROR", "-"),
        (16, "NOT_SUPPORTED", "library-failure")]),
    "cusolver": ("CUSOLVER_STATUS_", NVMATH.format("cusolver.Status"), [
        (1, "NOT_INITIALIZED", "-"), (2, "ALLOC_FAILED", "gpu-oom"), (3, "INVALID_VALUE", "-"),
        (4, "ARCH_MISMATCH", "arch-mismatch"), (5, "MAPPING_ERROR", "-"), (6, "EXECUTION_FAILED", "library-failure"),
        (7, "INTERNAL_ERROR", "library-failure"), (8, "MATRIX_TYPE_NOT_SUPPORTED", "-"),
        (9, "NOT_SUPPORTED", "library-failure"), (10, "ZERO_PIVOT", "-"), (11, "INVALID_LICENSE", "-")]),
    "cusparse": ("CUSPARSE_STATUS_", NVMATH.format("cusparse.Status"), [
        (1, "NOT_INITIALIZED", "-"), (2, "ALLOC_FAILED", "gpu-oom"), (3, "INVALID_VALUE", "-"),
        (4, "ARCH_MISMATCH", "arch-mismatch"), (5, "MAPPING_ERROR", "-"), (6, "EXECUTION_FAILED", "library-failure"),
        (7, "INTERNAL_ERROR", "library-failure"), (8, "MATRIX_TYPE_NOT_SUPPORTED", "-"), (9, "ZERO_PIVOT", "-"),
        (10, "NOT_SUPPORTED", "library-failure"), (11, "INSUFFICIENT_RESOURCES", "gpu-oom")]),
    "curand": ("CURAND_STATUS_", NVMATH.format("curand.Status"), [
        (100, "VERSION_MISMATCH", "-"), (101, "NOT_INITIALIZED", "-"), (102, "ALLOCATION_FAILED", "gpu-oom"),
        (103, "TYPE_ERROR", "-"), (104, "OUT_OF_RANGE", "-"), (105, "LENGTH_NOT_MULTIPLE", "-"),
        (106, "DOUBLE_PRECISION_REQUIRED", "-"), (201, "LAUNCH_FAILURE", "launch-failure"),
        (202, "PREEXISTING_FAILURE", "-"), (203, "INITIALIZATION_FAILED", "library-failure"),
        (204, "ARCH_MISMATCH", "arch-mismatch"), (999, "INTERNAL_ERROR", "library-failure")]),
    "cutensor": ("CUTENSOR_STATUS_", "https://docs.nvidia.com/cuda/cutensor/latest/api/types.html", [
        (1, "NOT_INITIALIZED", "-"), (3, "ALLOC_FAILED", "gpu-oom"), (7, "INVALID_VALUE", "-"),
        (8, "ARCH_MISMATCH", "arch-mismatch"), (11, "MAPPING_ERROR", "-"), (13, "EXECUTION_FAILED", "library-failure"),
        (14, "INTERNAL_ERROR", "library-failure"), (15, "NOT_SUPPORTED", "library-failure"), (16, "LICENSE_ERROR", "-"),
        (17, "CUBLAS_ERROR", "-"), (18, "CUDA_ERROR", "-"), (19, "INSUFFICIENT_WORKSPACE", "-"),
        (20, "INSUFFICIENT_DRIVER", "driver-mismatch"), (21, "IO_ERROR", "-")]),
    # NVRTC compiles source the program hands it: its statuses are the program's input or options, never a cause
    # alone but its own internal error.
    "nvrtc": ("NVRTC_ERROR_", "https://docs.nvidia.com/cuda/nvrtc/index.html#error-handling", [
        (1, "OUT_OF_MEMORY", "-"), (2, "PROGRAM_CREATION_FAILURE", "-"), (3, "INVALID_INPUT", "-"),
        (4, "INVALID_PROGRAM", "-"), (5, "INVALID_OPTION", "-"), (6, "COMPILATION", "-"),
        (7, "BUILTIN_OPERATION_FAILURE", "-"), (8, "NO_NAME_EXPRESSIONS_AFTER_COMPILATION", "-"),
        (9, "NO_LOWERED_NAMES_BEFORE_COMPILATION", "-"), (10, "NAME_EXPRESSION_NOT_VALID", "-"),
        (11, "INTERNAL_ERROR", "library-failure"), (12, "TIME_FILE_WRITE_FAILED", "-")]),
    # nvJPEG's ARCH_MISMATCH is "the device capabilities are not enough for the set of input parameters" (the
    # hardware decoder absent on this GPU: callers fall back to another backend), not a build without this GPU's code.
    "nvjpeg": ("NVJPEG_STATUS_", "https://docs.nvidia.com/cuda/nvjpeg/index.html#nvjpeg-api-return-codes", [
        (1, "NOT_INITIALIZED", "-"), (2, "INVALID_PARAMETER", "-"), (3, "BAD_JPEG", "-"),
        (4, "JPEG_NOT_SUPPORTED", "-"), (5, "ALLOCATOR_FAILURE", "-"), (6, "EXECUTION_FAILED", "library-failure"),
        (7, "ARCH_MISMATCH", "-"),
        (8, "INTERNAL_ERROR", "library-failure"), (9, "IMPLEMENTATION_NOT_SUPPORTED", "-"),
        (10, "INCOMPLETE_BITSTREAM", "-")]),
    # NVENCSTATUS of the Video Codec SDK's nvEncodeAPI.h. INVALID_VERSION is "an invalid struct version was used by
    # the client": a program built against a newer SDK than the installed driver's encoder knows (HandBrake on a
    # driver older than its NVENC API, https://github.com/HandBrake/HandBrake/issues/1827, tests/heldout/rnd28).
    "nvenc": ("NV_ENC_ERR_", "https://github.com/FFmpeg/nv-codec-headers/blob/master/include/ffnvcodec/nvEncodeAPI.h", [
        (1, "NO_ENCODE_DEVICE", "-"), (2, "UNSUPPORTED_DEVICE", "-"), (3, "INVALID_ENCODERDEVICE", "-"),
        (4, "INVALID_DEVICE", "-"), (5, "DEVICE_NOT_EXIST", "-"), (6, "INVALID_PTR", "-"), (7, "INVALID_EVENT", "-"),
        (8, "INVALID_PARAM", "-"), (9, "INVALID_CALL", "-"), (10, "OUT_OF_MEMORY", "-"),
        (11, "ENCODER_NOT_INITIALIZED", "-"), (12, "UNSUPPORTED_PARAM", "-"), (13, "LOCK_BUSY", "-"),
        (14, "NOT_ENOUGH_BUFFER", "-"), (15, "INVALID_VERSION", "driver-mismatch"), (16, "MAP_FAILED", "-"),
        (17, "NEED_MORE_INPUT", "-"), (18, "ENCODER_BUSY", "-"), (19, "EVENT_NOT_REGISTERD", "-"),
        (20, "GENERIC", "-"), (21, "INCOMPATIBLE_CLIENT_KEY", "-"), (22, "UNIMPLEMENTED", "-"),
        (23, "RESOURCE_REGISTER_FAILED", "-"), (24, "RESOURCE_NOT_REGISTERED", "-"), (25, "RESOURCE_NOT_MAPPED", "-"),
        (26, "NEED_MORE_OUTPUT", "-")]),
}
HEADER = ["library", "number", "name", "version", "message", "cause", "sources"]


def _reference(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.read_text(encoding="utf-8").splitlines(), delimiter="\t"))


def rows(reference: Path) -> list[list[str]]:
    out: list[list[str]] = []
    for row in _reference(reference / "cublas-status.tsv"):
        out.append(["cublas", row["number"], row["name"], "-", row["meaning"], row["cause"], row["sources"]])
    for row in _reference(reference / "cudnn-status.tsv"):
        out.append(["cudnn", row["number"], row["name"], row["cudnn_major"], row["meaning"], row["cause"],
                    row["sources"]])
    for row in _reference(reference / "nccl-result.tsv"):
        message = row["message"] if not row["message"].startswith("(") else "-"
        out.append(["nccl", row["number"], row["name"], "-", message, row["cause"], row["sources"]])
    for library, (prefix, source, codes) in PUBLISHED.items():
        for number, suffix, cause in codes:
            out.append([library, str(number), prefix + suffix, "-", "-", cause, source])
    return [r for r in out if not r[2].endswith(("_SUCCESS", "Success", "NumResults"))]


def render(reference: Path) -> str:
    lines = ["# Status codes of the CUDA libraries, one row each: written by tools/gen_library_status.py "
             "(do not edit).",
             "\t".join(HEADER)]
    lines += ["\t".join(cell.replace("\t", " ") for cell in row) for row in rows(reference)]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reference", type=Path, default=ROOT / "tests" / "given" / "reference")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    return write_or_check(OUT, render(args.reference), args.check)


if __name__ == "__main__":
    sys.exit(main())
