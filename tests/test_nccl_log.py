"""NCCL / ProcessGroupNCCL lines from real training and nccl-tests logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import database_with, parse_alone
from postmortem.pipeline import analyze_text
from postmortem.signatures import match
from postmortem.sources import nccl_log

DATA = Path(__file__).parent / "data" / "nccl_log"


def events(name: str):
    """Parse one sample with this source alone."""
    return parse_alone(nccl_log, (DATA / name).read_bytes(), name)


def of_kind(found, kind):
    return [e for e in found if e.kind == kind]


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    return database_with(tmp_path_factory.mktemp("signatures"), "nccl.yaml")


def test_same_timeout_from_many_ranks_is_one_event():
    [timeout] = events("timeout-llamafactory.log")
    assert timeout.kind == "nccl-timeout"
    assert timeout.fields["seq"] == 7753
    assert timeout.fields["op_type"] == "_REDUCE_SCATTER_BASE"
    assert timeout.fields["numel_in"] == 544997376
    assert timeout.fields["numel_out"] == 68124672
    assert timeout.fields["timeout_ms"] == 600000
    assert timeout.fields["ran_ms"] == 600061
    assert timeout.fields["ranks"] == [0, 3, 4]
    assert timeout.count == 3
    assert timeout.where.line == 1
    # the watchdog's "detected by watchdog at work" line adds how far the queue got
    assert (timeout.fields["last_enqueued"], timeout.fields["last_completed"]) == (7755, 7752)


def test_old_format_without_numel_or_rank_prefix():
    [timeout] = events("timeout-ofa.log")
    assert timeout.fields["seq"] == 469508
    assert timeout.fields["op_type"] == "ALLREDUCE"
    assert timeout.fields["timeout_ms"] == 1800000
    assert "numel_in" not in timeout.fields
    assert timeout.fields["ranks"] == [1, 2, 3, 6, 7]


def test_different_collectives_stay_apart_and_global_rank_wins():
    timeouts = of_kind(events("timeout-alltoall.log"), "nccl-timeout")
    assert [(t.fields["seq"], t.fields["op_type"]) for t in timeouts] == [(216, "ALLTOALL_BASE"), (57, "ALLREDUCE")]
    assert timeouts[0].fields["rank"] == 13 and timeouts[0].fields["group_rank"] == 1
    assert timeouts[0].time is not None and timeouts[0].time.year == 2025


def test_hard_wrapped_timeout_is_joined():
    found = events("timeout-wrapped-openr1.log")
    [timeout] = of_kind(found, "nccl-timeout")
    assert (timeout.where.line, timeout.where.end_line) == (4, 6)
    assert timeout.fields["seq"] == 4 and timeout.fields["op_type"] == "BROADCAST"
    assert timeout.fields["timeout_ms"] == 1800000 and timeout.fields["ran_ms"] == 1800010
    assert "Timeout(ms)=1800000" in timeout.text
    [abort] = of_kind(found, "nccl-abort")
    assert abort.fields["ranks"] == [2, 3, 4]


def test_watchdog_exception_keeps_its_cuda_reason(database):
    [abort] = events("watchdog-cuda-error.log")
    assert abort.kind == "nccl-abort"
    assert abort.fields["reason"] == "CUDA error: an illegal memory access was encountered"
    assert abort.fields["rank"] == 3
    assert "watchdog thread terminated with exception" in abort.text
    assert match(database, [abort]) == []  # the CUDA error is the finding, not the abort


def test_warn_line_fields():
    found = events("warn-ib-socket.log")
    [warn] = of_kind(found, "nccl-warn")
    assert warn.fields["host"] == "n122-246-085"
    assert (warn.fields["pid"], warn.fields["tid"], warn.fields["cuda_device"]) == (12251, 12400, 5)
    assert warn.fields["src"] == "misc/socket.cc:483"
    assert warn.fields["remote"] == "fe80::966d:ae03:a2:8cf0%ib1"
    assert warn.fields["errno_text"] == "Software caused connection abort"
    assert warn.where.line == 17
    [trace] = of_kind(found, "nccl-error")
    assert trace.fields["result"] == "ncclSystemError" and trace.fields["via"] == "trace"
    assert trace.count == 18  # the "-> 2" unwinding lines fold into one


def test_masked_host_and_remote_closed():
    found = events("abort-connclosed.log")
    [warn] = of_kind(found, "nccl-warn")
    assert warn.fields["host"] == "<merlin-training>"
    assert warn.fields["errno_text"] == "Connection closed by remote peer"
    assert warn.fields["remote"] == "<merlin-training>.ap-south-1.compute.internal"
    assert warn.fields["remote_port"] == 40048
    [abort] = of_kind(found, "nccl-abort")
    assert "To avoid data inconsistency" in abort.text


def test_nccl_tests_failure_line_names_the_result():
    found = events("warn-remote-closed.log")
    [error] = of_kind(found, "nccl-error")
    assert error.fields == {"message": "unhandled system error", "src": "common.cu:921",
                            "result": "ncclSystemError", "code": 2}


@pytest.mark.parametrize(("name", "category"), [
    ("warn-proxy.log", "proxy"), ("warn-ib-completion.log", "ib"), ("warn-shm.log", "shm")])
def test_warn_categories(name, category):
    assert category in {e.fields["category"] for e in of_kind(events(name), "nccl-warn")}


def test_repeated_warn_from_one_rank_folds():
    [warn] = of_kind(events("warn-ib-completion.log"), "nccl-warn")
    assert warn.count == 2 and warn.fields["category"] == "ib"


def test_shm_warn_keeps_the_wall_clock():
    warns = of_kind(events("warn-shm.log"), "nccl-warn")
    assert warns[0].time is not None and warns[0].time.hour == 21


@pytest.mark.parametrize(("name", "signature", "cause"), [
    ("timeout-llamafactory.log", "nccl-watchdog-timeout", "nccl-timeout"),
    ("warn-proxy.log", "nccl-transport-failure", "nccl-comm-error"),
    ("warn-ib-completion.log", "nccl-transport-failure", "nccl-comm-error"),
    ("warn-remote-closed.log", "nccl-transport-failure", "nccl-comm-error"),
    ("warn-shm.log", "nccl-shm-segment", "shm-exhausted"),
])
def test_signatures_on_real_logs(database, name, signature, cause):
    found = {f.signature: f.cause for f in match(database, events(name))}
    assert found.get(signature) == cause


def test_info_noise_and_internal_trace_make_no_finding(database):
    found = [f.signature for f in match(database, events("timeout-alltoall.log"))]
    assert found == ["nccl-watchdog-timeout"]


def test_version_info_line_and_odd_input():
    text = (b"gpu1:1:1 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\n"
            b"gpu1:1:1 [0] NCCL INFO Channel 00/02 :    0   1\n"
            b"NCCL WARN\n\xff\xfe WorkNCCL( garbage collective operation timeout\n")
    found = parse_alone(nccl_log, text, "mixed.log")
    [version] = of_kind(found, "nccl-version")
    assert version.fields["nccl_version"] == "2.18.1" and version.fields["nccl_cuda"] == "12.1"
    assert not of_kind(found, "nccl-timeout")


def test_folded_timeout_keeps_each_ranks_own_report():
    """Ranks 0, 3, 4 fold into one event; each keeps its own duration, glog stamp, process group and progress."""
    [timeout] = events("timeout-llamafactory.log")
    per_rank = timeout.fields["per_rank"]
    assert sorted(per_rank) == [0, 3, 4]
    assert [per_rank[r]["ran_ms"] for r in (0, 3, 4)] == [600061, 600089, 600099]
    assert per_rank[3]["stamp"] == "1206 18:44:13.275158"
    assert per_rank[4] == {"ran_ms": 600099, "stamp": "1206 18:44:12.755262", "pg": "1",
                          "last_enqueued": 7755, "last_completed": 7752}
    assert "last_completed" not in per_rank[3]  # rank 3 printed no "detected by watchdog at work" line


def test_progress_lines_are_keyed_by_rank_and_sequence():
    """Two ranks reporting the same SeqNum with different progress: each keeps its own (the old code kept one)."""
    text = (DATA / "timeout-llamafactory.log").read_text().replace(
        "[PG 1 Rank 4] Exception (either an error or timeout) detected by watchdog at work: 7753, "
        "last enqueued NCCL work: 7755, last completed NCCL work: 7752.",
        "[PG 1 Rank 4] Exception (either an error or timeout) detected by watchdog at work: 7753, "
        "last enqueued NCCL work: 7753, last completed NCCL work: 7751.")
    [timeout] = parse_alone(nccl_log, text.encode(), "edited.log")
    assert (timeout.fields["last_enqueued"], timeout.fields["last_completed"]) == (7755, 7752)  # rank 0's
    assert timeout.fields["per_rank"][4]["last_completed"] == 7751


def test_sub_group_rank_and_pg_id_per_rank():
    first = of_kind(events("timeout-alltoall.log"), "nccl-timeout")[0]
    assert first.fields["per_rank"][13] == {
        "ran_ms": 600045, "group_rank": 1, "pg": "11", "time": "2025-02-18T12:54:00",
        "stamp": "0218 04:54:22.864467", "last_enqueued": 220, "last_completed": 215}


def test_thousands_of_interleaved_rank_lines_fold_into_one_timeout():
    """The real llamafactory log re-labelled for 64 ranks and interleaved line by line (the test builds it)."""
    lines = (DATA / "timeout-llamafactory.log").read_text().splitlines()
    mixed = []
    for line in lines:
        for rank in range(64):
            mixed.append(line.replace("[rank0]:", f"[rank{rank}]:").replace("[Rank 0]", f"[Rank {rank}]"))
    raw = ("\n".join(mixed) + "\n").encode() * 5
    assert raw.count(b"\n") > 1000
    timeouts = of_kind(parse_alone(nccl_log, raw, "interleaved.log"), "nccl-timeout")
    assert len(timeouts) == 1
    assert set(range(64)) <= set(timeouts[0].fields["ranks"])


@pytest.mark.parametrize("line, result, signature", [
    # https://github.com/BVLC/caffe/issues/5599
    ("F0508 14:41:40.563820 19761 parallel.cpp:195] Check failed: result == ncclSuccess (1 vs. 0)  "
     "unhandled cuda error",
     "ncclUnhandledCudaError", "nccl-unhandled-cuda-error"),
    # https://github.com/ppengtang/oicr/issues/10
    ("F0118 23:24:48.788218 37264 parallel.cpp:135] Check failed: result == ncclSuccess (2 vs. 0)  unhandled system "
     "error. *** Check failure stack trace: ***     I tried cuda9 and cuda8, got the same problem.",
     "ncclSystemError", "nccl-transport-failure"),
])
def test_caffes_check_on_an_nccl_call_names_the_result(line, result, signature):
    from postmortem.pipeline import analyze_text

    report = analyze_text(line + "\n")
    error = next(e for e in report.events if e.kind == "nccl-error")
    assert error.fields["result"] == result and error.fields["src"] in line
    assert report.verdict.signature == signature


def test_a_result_retyped_with_a_slip_is_still_that_result():
    """https://github.com/pytorch/pytorch/issues/23363: the reporter retyped the message ("unhanled")."""
    from postmortem.pipeline import analyze_text

    line = ("fail to new train...e= NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:272, "
            "unhanled system error")
    error = next(e for e in analyze_text(line + "\n").events if e.kind == "nccl-error")
    assert error.fields["result"] == "ncclSystemError"
    assert nccl_log._retyped("unhandled cuda error") == "ncclUnhandledCudaError"
    assert nccl_log._retyped("unhandled error") is None  # too far from any result's text


# NCCL's warning without its `NCCL WARN` head: the "Last error:" PyTorch copies it under (vllm-project/vllm#6689),
# and the /dev/shm segment message quoted alone (fal-ai-community/video-diffusion-speedrun#2). Both are read as the
# warning itself, so every NCCL WARN rule applies to them.
QUOTED_WARNINGS = [
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
     "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n[rank0]: ncclSystemError: "
     "System call (e.g. socket, malloc) or external library call failed or device error.\n[rank0]: Last error:\n"
     "[rank0]: Error while creating shared memory segment /dev/shm/nccl-eQz2sT (size 5767520)\n",
     "last-error", "Error while creating shared memory segment /dev/shm/nccl-eQz2sT (size 5767520)"),
    ("Error while creating shared memory segment /dev/shm/nccl-pZafXL (size 7340384)\n",
     "quoted", "Error while creating shared memory segment /dev/shm/nccl-pZafXL (size 7340384)"),
]


@pytest.mark.parametrize(("text", "via", "message"), QUOTED_WARNINGS)
def test_an_nccl_warning_quoted_without_its_head_is_the_warning(text, via, message):
    report = analyze_text(text)
    [warning] = [e for e in report.events if e.kind == "nccl-warn"]
    assert (warning.fields["via"], warning.fields["message"], warning.fields["category"]) == (via, message, "shm")
    assert (report.findings[0].signature, report.findings[0].cause) == ("nccl-shm-segment", "shm-exhausted")


def test_a_shared_memory_line_of_another_program_is_not_nccls():
    assert not [e for e in analyze_text("Error while creating shared memory segment /dev/shm/torch_123_456\n").events
                if e.kind == "nccl-warn"]
