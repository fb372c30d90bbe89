"""NCCL's per-call COLL lines from real jobs: ranks that called different collectives at one step, and jobs whose
ranks agreed."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import parse_alone
from postmortem.pipeline import analyze_text
from postmortem.sources import nccl_collectives

TESTS = Path(__file__).parent
DATA = TESTS / "data" / "nccl_log"
MISMATCH = TESTS / "heldout" / "rnd30" / "rnd30h-nccl-bcast-mismatch-hang-01" / "nccl-debug-coll.log"
"""NVIDIA/nccl#147: rank 0 broadcast 25,503,912 float16 values while ranks 1-7 broadcast 53 int64 values."""


def test_the_rank_that_broadcast_something_else_is_named_first():
    [event] = parse_alone(nccl_collectives, MISMATCH.read_bytes(), MISMATCH.name)
    assert event.kind == "nccl-collective-mismatch" and event.fields["op_count"] == 0
    odd, usual = event.fields["calls"]
    assert odd == {"call": "Broadcast of 25,503,912 float16 (op 0, root 0)", "processes": 1,
                   "first": "learnfair062:32615"}
    assert usual["call"] == "Broadcast of 53 int64 (op 0, root 0)" and usual["processes"] == 4
    assert "count 25503912 datatype 6" in event.text and "count 53 datatype 4" in event.text


def test_the_verdict_is_a_hang_of_diverged_ranks_not_the_network():
    report = analyze_text(MISMATCH.read_text())
    assert report.findings[0].cause == "nccl-timeout"
    assert report.findings[0].signature == "nccl-collective-mismatch"


@pytest.mark.parametrize("name", ["coll-tp-torchtitan.log", "coll-ray-allreduce.log", "coll-rccl-acc.log"])
def test_ranks_that_made_the_same_calls_give_no_event(name):
    """Tensor-parallel ranks with hexadecimal opCounts, Ray workers behind their prefix, RCCL's lines with `acc`."""
    text = (DATA / name).read_bytes()
    assert len(list(nccl_collectives._calls(_as_lines(text.decode().splitlines())))) >= 4  # the lines are read
    assert parse_alone(nccl_collectives, text, name) == []


def test_a_process_with_two_communicators_of_one_size_is_not_compared():
    """Without a hash two communicators of one size cannot be told apart across processes: a process showing two
    pointers of that size is left out rather than compared with the wrong communicator."""
    lines = MISMATCH.read_text().splitlines()
    second = lines[0].replace("comm 0x7f88e005a260", "comm 0x7f88e0099990").replace("count 25503912 datatype 6",
                                                                                      "count 53 datatype 4")
    calls = list(nccl_collectives._comparable(list(nccl_collectives._calls(_as_lines([*lines, second])))))
    assert {call.process for call in calls} == {("learnfair062", pid) for pid in (32617, 32619, 32621, 32623)}


def test_point_to_point_calls_are_not_compared():
    lines = [line.replace("Broadcast:", "Send:") for line in MISMATCH.read_text().splitlines()]
    assert list(nccl_collectives._calls(_as_lines(lines))) == []


def _as_lines(texts: list[str]):
    from postmortem.text import Line

    return [Line(number, 0, 0, text) for number, text in enumerate(texts, 1)]
