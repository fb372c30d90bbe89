"""Every `NCCL WARN` wording NCCL can print gets a category from data/nccl-warnings.tsv, not the catch-all "other".

tests/data/nccl-warn-catalog.tsv lists NCCL's own WARN formats (tools/gen_nccl_warn_catalog.py reads them from
github.com/NVIDIA/nccl, every minor release since v2.3 and master). Each is rendered with plausible values as the
line NCCL writes (`host:pid:tid [dev] file:line NCCL WARN message`, the file as NCCL names it, relative to src/) and
read by the NCCL source: it must become an nccl-warn event of a named category. A CUDA failure NCCL caught takes
the cause of its CUDA error, read as any CUDA error is. The real-line tests run the whole pipeline on lines users
posted and check the finding's cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import catalog_rows, parse_alone, printf_filled
from postmortem import pipeline
from postmortem.sources import nccl_log

CATALOG = Path(__file__).parent / "data" / "nccl-warn-catalog.tsv"
CATCH_ALL = "other"
"""What the reader calls a wording no row of data/nccl-warnings.tsv names."""
CATALOG_FLOOR = 1200
"""NCCL v2.3 .. v2.30 print about 1,300 wordings: far fewer means the catalog was cut, and the test proves less."""

_VALUES = {"s": "word", "p": "0x0", "c": "x", "m": "Success", "%": "%"}
"""%d and the other numbers -> 0, %s -> a word, %p -> 0x0 (%m is glibc's strerror(errno))."""


@dataclass(frozen=True)
class Wording:
    format: str
    file: str
    release: str


def catalog() -> list[Wording]:
    return [Wording(row["format"], row["file"], row["release"]) for row in catalog_rows(CATALOG)]


def render(wording: Wording, values: dict[str, str] | None = None) -> str:
    """The line NCCL writes for the wording: its file as the log names it (relative to src/) and line."""
    values = _VALUES | (values or {})
    message = printf_filled(wording.format, values)
    return f"host:1234:5678 [0] {wording.file.removeprefix('src/')} NCCL WARN {message}"


def category(line: str) -> str | None:
    """The category the NCCL source gives the warning on `line` (None: it made no nccl-warn event)."""
    warnings = [e for e in parse_alone(nccl_log, (line + "\n").encode(), use_hyperscan=False) if e.kind == "nccl-warn"]
    return warnings[0].fields["category"] if warnings else None


def test_every_catalog_wording_gets_a_category():
    wordings = catalog()
    assert len(wordings) >= CATALOG_FLOOR
    missed = [f"{w.file} {w.format!r} -> {found}" for w in wordings
              if (found := category(render(w))) in (None, CATCH_ALL)]
    assert not missed, f"{len(missed)} of {len(wordings)} wordings without a category:\n" + "\n".join(missed)


def test_every_category_the_table_gives_is_one_the_table_documents():
    """A category is a word signatures match on: a misspelt one in a row would silently match nothing."""
    table = (Path(nccl_log.__file__).parent.parent / "data" / "nccl-warnings.tsv").read_text(encoding="utf-8")
    header = " ".join(line for line in table.splitlines() if line.startswith("#"))
    named = {row.category for row in nccl_log.wordings()}
    assert all(re.search(rf"\b{name}\b", header) for name in named), named
    assert CATCH_ALL not in named


def _cuda_wordings() -> list[Wording]:
    """The catalog's wordings that quote a CUDA error string as `'%s'` and that the table files under cuda."""
    return [w for w in catalog() if "'%s'" in w.format and category(render(w)) == "cuda"]


@pytest.mark.parametrize(("error", "cause"), [("out of memory", "gpu-oom"),
                                              ("an illegal memory access was encountered", "illegal-memory-access")])
def test_a_cuda_failure_nccl_caught_has_the_cuda_errors_cause(tmp_path, error, cause):
    wordings = _cuda_wordings()
    assert {"Cuda failure '%s'", "Cuda failure %d '%s'"} <= {w.format for w in wordings}
    for wording in wordings:
        line = render(wording, {"s": error}).replace("'word'", f"'{error}'")
        log = tmp_path / "nccl.log"
        log.write_text(line + "\n", encoding="utf-8")
        verdict = pipeline.analyze([str(log)]).verdict
        assert verdict is not None and verdict.cause == cause, (line, verdict)


REAL = [
    # (lines as posted, where, the verdict's cause; None: no finding, and the warning's category instead)
    (["VM-0-16-ubuntu:392:494 [2] enqueue.cc:43 NCCL WARN Cuda failure 'out of memory'"],
     "https://github.com/NVIDIA/TensorRT-LLM/issues/1670", "gpu-oom", "cuda"),
    (["ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
      "ng30903:3063028:3066152 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes"],
     "https://github.com/NVIDIA/nccl/issues/1235", "gpu-oom", "cuda"),
    (["A03-R28-I49-2-6000166:104934:104934 [1] init.cc:204 NCCL WARN Cuda failure 'an illegal memory access was "
      "encountered'"], "https://github.com/NVIDIA/nccl/issues/629", "illegal-memory-access", "cuda"),
    (["[2026-06-23 15:45:07] gpu-stress-dgc86-xfpt6:420:437 [5] transport/nvls.cc:379 (nvlsAllocateMem) NCCL WARN "
      "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation cannot be "
      "performed in the present state'."], "https://github.com/NVIDIA/DCGM/issues/304", "gpu-nvlink", "nvls"),
    (["10.10.23.10: so-ucloud-10-10-23-10:1307367:1307586 [0] transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 "
      "tag 0 peer 10.10.23.6<58683> collective mismatch error, local size 496640 remote size 65536"],
     "https://github.com/NVIDIA/nccl/issues/969", "nccl-comm-error", "ib"),
    (["hai-a100-3:3778851:3779883 [4] ibvwrap.c:130 NCCL WARN Call to ibv_create_qp failed"],
     "https://github.com/NVIDIA/nccl/issues/562", "nccl-comm-error", "ib"),
    (["ubuntu:39964:40073 [1] proxy.cc:1456 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable"],
     "https://github.com/NVIDIA/nccl-tests/issues/166", "nccl-comm-error", "proxy"),
    (["ubuntu:9621:9691 [6] misc/shmutils.cc:71 NCCL WARN Error: failed to extend /dev/shm/nccl-fjwOOB to 5967876 "
      "bytes"], "https://github.com/NVIDIA/nccl-tests/issues/166", "shm-exhausted", "shm"),
    (["[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 "
      "both on CUDA device 1000"], "https://github.com/horovod/horovod/issues/3929", None, "config"),
    (["node-8x-v100-nvlink-1:39719:39719 [3] init.cu:1197 NCCL WARN Mismatched collective detected, please check "
      "your collective calls at and around rank 11. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see "
      "the collective logs"], "https://github.com/NVIDIA/nccl/issues/214", None, "mismatch"),
]


@pytest.mark.parametrize(("lines", "where", "cause", "first_category"), REAL, ids=[r[1] for r in REAL])
def test_real_nccl_warning_names_its_cause(tmp_path, lines, where, cause, first_category):
    log = tmp_path / "nccl.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = pipeline.analyze([str(log)])
    warnings = [e for e in report.events if e.kind == "nccl-warn"]
    assert {e.fields["category"] for e in warnings} == {first_category}, [dict(e.fields) for e in warnings]
    if cause is None:
        assert report.verdict is None, report.verdict  # a usage error or mismatch: no GPU or fabric cause
    else:
        assert report.verdict is not None and report.verdict.cause == cause, report.verdict


def test_warning_of_newer_nccl_keeps_its_file_beside_the_function_name():
    """NCCL 2.30 writes `file:line (function) NCCL WARN`: the file still names the transport of a generic wording."""
    [warning] = parse_alone(nccl_log, b"h:1:2 [0] transport/net_socket.cc:161 (ncclNetSocketGetSpeed) "
                                      b"NCCL WARN Call to close failed: Bad file descriptor\n")
    assert warning.fields["src"] == "transport/net_socket.cc:161"
    assert warning.fields["category"] == "socket"
