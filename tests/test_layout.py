"""Layout does not change a verdict: every real case, re-laid out the ways text reaches us.

Each case of tests/given/corpus and tests/corpus is quoted, indented, given a gutter, CRLF line
ends, or the prefix of a relay (kubectl --timestamps, docker compose, torchrun, srun), and must
get the same root cause as the text as posted; the evidence still shows the lines as written,
at their line numbers. The normalising step (postmortem.normalise) is what makes this hold for
every source at once.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from postmortem.inputs import Blob
from postmortem.normalise import relay_rank, strip_transport
from postmortem.pipeline import analyze_blobs, analyze_text
from postmortem.reader import BytesReader

HERE = Path(__file__).parent
ROOTS = (HERE / "given" / "corpus" / "cases", HERE / "corpus")

LAYOUTS = {
    "indented": lambda line, i, n: "    " + line,
    "quoted": lambda line, i, n: "> " + line,
    "gutter": lambda line, i, n: f"{i + 1:>5} | " + line,
    "crlf": lambda line, i, n: line + "\r",
    "kubectl": lambda line, i, n: f"2024-05-01T10:00:00.{i:09d}Z " + line,
    "compose": lambda line, i, n: "trainer-1  | " + line,
    # a launcher's prefix names the rank that wrote the line: each input its own, so that the layout says
    # no more than the text did (the same rank on two unrelated inputs would tie them as one process)
    "torchrun": lambda line, i, n: f"[rank{3 + n}]: " + line,
    "srun": lambda line, i, n: f"{n}: " + line,
}
"""How each relay lays out line `i` of the case's input `n`."""


def _cases() -> list[Path]:
    return sorted(p.parent for root in ROOTS if root.is_dir() for p in root.rglob("case.yaml"))


def _verdict(case: Path, layout: str | None) -> str:
    blobs = []
    for n, path in enumerate(sorted(p for p in case.iterdir() if p.is_file() and p.name != "case.yaml")):
        data = path.read_bytes()
        if data[:4] == b"\x7fELF":
            blobs.append(Blob(str(path), BytesReader(data), kind="elf"))
            continue
        if layout is not None:
            lines = data.decode("utf-8", "replace").split("\n")
            data = "\n".join(LAYOUTS[layout](line, i, n) for i, line in enumerate(lines)).encode()
        blobs.append(Blob(str(path), BytesReader(data)))
    findings = analyze_blobs(blobs).findings
    return findings[0].cause if findings else "unknown"


@cache
def _plain() -> dict[Path, str]:
    return {case: _verdict(case, None) for case in _cases()}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_layout_keeps_every_verdict(layout):
    plain = _plain()
    if not plain:
        pytest.skip("no corpus here")
    changed = {case.name: (verdict, _verdict(case, layout)) for case, verdict in plain.items()
               if _verdict(case, layout) != verdict}
    assert not changed


def test_evidence_shows_the_line_as_written():
    # https://github.com/vllm-project/vllm/issues/24815, quoted into an issue
    text = ("some context\n> (VllmWorker TP1 pid=409) ERROR 09-14 03:15:31 [multiproc_executor.py:596] RuntimeError: "
            "CUDA error: an illegal memory access was encountered\n")
    report = analyze_text(text)
    event = report.event(report.findings[0].evidence[0])
    assert event.where.line == 2 and event.text.startswith("> (VllmWorker TP1 pid=409) ERROR")


@pytest.mark.parametrize(("written", "body"), [
    ("> > [rank3]: RuntimeError: x", "RuntimeError: x"),
    ("  12 | NVRM: Xid (PCI:0000:01:00): 79", "NVRM: Xid (PCI:0000:01:00): 79"),
    ("vllm-1  | INFO 05-01 ready", "INFO 05-01 ready"),
    ("[1,0]<stderr>:[HOST:03599] Signal: Segmentation fault (11)", "[HOST:03599] Signal: Segmentation fault (11)"),
    ("(raylet) node_manager.cc:3277: 2 Workers killed", "node_manager.cc:3277: 2 Workers killed"),
    ("2024-05-01T10:00:00.123456789Z Traceback (most recent call last):", "Traceback (most recent call last):"),
    ("2024-05-01T10:00:00+0200 node7 kernel: NVRM: Xid", "2024-05-01T10:00:00+0200 node7 kernel: NVRM: Xid"),
    ("        Power Draw                        : 22.43 W", "        Power Draw                        : 22.43 W"),
])
def test_strip_transport(written, body):
    assert strip_transport(written) == body


@pytest.mark.parametrize(("written", "rank"), [
    ("> > [rank3]: RuntimeError: x", 3),
    ("[default12]:[E ProcessGroupNCCL.cpp:737] [Rank 12] Watchdog caught collective operation timeout", 12),
    ("[1,5]<stderr>:[HOST:03599] Signal: Segmentation fault (11)", 5),
    ("7: Thread 8851 (idle): \"MainThread\"", 7),
    ("  12 | [rank4]: NCCL WARN x", 4),
    ("vllm-1  | INFO 05-01 ready", None),
    ("[Rank 3] Watchdog caught collective operation timeout", None),
])
def test_relay_rank_is_read_from_the_layers_strip_transport_takes_off(written, rank):
    assert relay_rank(written) == rank
