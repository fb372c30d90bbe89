"""GPU health tests: dcgmi diag, DCGM health monitors, gpu-burn, memory testers and nccl-tests.

Every input is real public text from tests/data/health_tests (see SOURCES.md there).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import parse_alone
from postmortem.pipeline import analyze, analyze_text
from postmortem.signatures import load_default
from postmortem.sources import health_tests

DATA = Path(__file__).parent / "data" / "health_tests"


def events(name: str):
    return parse_alone(health_tests, (DATA / name).read_bytes(), name)


def report(name: str):
    return analyze([str(DATA / name)])


def causes(name: str) -> list[str]:
    return [f.cause for f in report(name).findings]


# ---------------------------------------------------------------- the DCGM failure reason table

def test_failure_reason_table_is_complete_and_uses_the_vocabulary():
    reasons = health_tests.failure_reasons()
    assert sorted(reasons) == list(range(112))
    vocabulary = load_default().causes
    assert all(r.cause in vocabulary for r in reasons.values() if r.cause)
    assert reasons[52].name == "DCGM_FR_FAULTY_MEMORY" and reasons[52].cause == "gpu-memory-ecc"
    assert (reasons[14].cause, reasons[3].cause, reasons[40].cause) == ("gpu-nvlink", "pcie-bus", "gpu-thermal-power")
    assert reasons[51].cause is None  # DCGM_FR_CUDA_API: a software failure of the diagnostic
    assert health_tests.reason_named("DCGM_FR_CLOCKS_EVENT_THERMAL") is reasons[10]  # the DCGM 3.3 spelling


def test_messages_in_dcgm_wording_name_their_code():
    reasons = health_tests.failure_reasons()
    faulty = reasons[52].message.replace("%d", "12").replace("%u", "3")  # DCGM's own format, filled in
    assert health_tests.reasons_in(faulty) == [reasons[52]]
    # one format shared by four codes ("Detected %ld %s for GPU %u") names none of them
    shared = reasons[103].message.replace("%ld", "2").replace("%s", "volatile DBE").replace("%u", "0")
    assert health_tests.reasons_in(shared) == []


# ---------------------------------------------------------------- dcgmi diag

def test_dcgm_pcie_test_failing_on_nvlink_links():
    [event] = events("dcgmi-2.4.6-pcie-nvlink-down.txt")
    f = event.fields
    assert (event.kind, f["tool"], f["test"], f["section"], f["result"]) == ("health-test", "dcgmi", "PCIe",
                                                                             "Integration", "fail")
    assert (f["error_code"], f["error_id"], f["error_cause"]) == ("DCGM_FR_NVLINK_DOWN", 14, "gpu-nvlink")
    assert "gpu_index" not in f  # "Fail - All"
    # the message dcgmi cut into 45-character rows, joined back
    assert "GPU 0's NvLink link 4 is currently down Run a field diagnostic on the GPU." in f["message"]
    assert (event.where.line, event.where.end_line) == (2, 11)
    assert event.text.splitlines()[0].startswith("| PCIe                      | Fail - All")
    verdict = report("dcgmi-2.4.6-pcie-nvlink-down.txt").verdict
    assert (verdict.signature, verdict.cause) == ("health-test-nvlink", "gpu-nvlink")


def test_dcgm_memory_test_failing_for_a_cuda_context_is_not_bad_memory():
    [event] = events("dcgmi-3.3.1-memory-fail-cuda-context.txt")  # GPU 1 passed: no event for it
    f = event.fields
    assert (f["test"], f["section"], f["result"], f["gpu_index"]) == ("GPU Memory", "Hardware", "fail", 0)
    assert f["message"] == ("GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs for errors. Reset GPU. "
                            "Restart DCGM. Rerun diagnostics. Unable to create CUDA context: 'CUDA-capable device(s) "
                            "is/are busy or unavailable'.")
    assert (f["error_code"], f["error_category"]) == ("DCGM_FR_CUDA_API", "SOFTWARE_CUDA")
    assert "error_cause" not in f
    assert (event.where.line, event.where.end_line) == (11, 17)
    assert causes("dcgmi-3.3.1-memory-fail-cuda-context.txt") == []


def test_dcgm_json_warning_carries_its_error_id():
    [event] = events("dcgmi-json-gflops-fail.txt")
    f = event.fields
    assert (f["tool"], f["result"], f["gpu_index"], f["error_id"]) == ("dcgmi", "fail", 5, 110)
    assert f["error_code"] == "DCGM_FR_GFLOPS_THRESHOLD_VIOLATION" and "error_cause" not in f
    assert f["message"].startswith("GPU 5 Detected 511.70 GFLOPs for GPU 5 which is below the threshold 1480.77")
    assert causes("dcgmi-json-gflops-fail.txt") == []  # a performance threshold names no cause


def test_dcgm_health_monitor_event_naming_a_code():
    [event] = events("nvsentinel-dcgm-power-watch-event.txt")
    f = event.fields
    assert (f["tool"], f["gpu_index"], f["pci"]) == ("dcgm", 0, "0001:00:00.0")
    assert f["gpu_uuid"] == "GPU-4af877ac-a2b7-9586-06e1-d900b47f2505"
    assert (f["error_code"], f["error_id"]) == ("DCGM_FR_CLOCK_THROTTLE_POWER", 12)
    assert f["error_cause"] == "gpu-thermal-power"
    analysed = report("nvsentinel-dcgm-power-watch-event.txt")
    assert (analysed.verdict.signature, analysed.verdict.cause) == ("health-test-thermal-power", "gpu-thermal-power")
    assert analysed.verdict.severity == "warning"
    assert analysed.facts["gpu_uuid"] == ["GPU-4af877ac-a2b7-9586-06e1-d900b47f2505"]


def test_dcgm_health_verdict_naming_an_xid_is_read_as_that_xid():
    # DCGM's health watch formats DCGM_FR_XID_ERROR with the Xid it saw and the GPU (dcgmlib's
    # DCGM_ERROR_FORMAT_MESSAGE(DCGM_FR_XID_ERROR, d, intValue, gpuId)); its own format, filled in
    message = health_tests.reason_named("DCGM_FR_XID_ERROR").message.replace("%u", "79", 1).replace("%u", "3", 1)
    line = f"ErrorCode:DCGM_FR_XID_ERROR GPU:3 {message}"
    events = parse_alone(health_tests, line.encode(), "watch.txt")
    assert [(e.kind, e.fields.get("xid"), e.fields.get("gpu_index")) for e in events] == [
        ("health-test", None, 3), ("xid", 79, 3)]
    assert analyze_text(line).verdict.signature == "xid-79"
    # a reason that names no Xid, and an Xid-category reason that passed, give none
    assert [e.kind for e in parse_alone(health_tests, b"ErrorCode:DCGM_FR_XID_ERROR GPU:3", "w.txt")] == [
        "health-test"]


@pytest.mark.parametrize(("name", "tests", "version", "driver"), [
    ("dcgmi-3.0.4-deployment-pass.txt", 9, None, None),
    ("dcgmi-3.3.7-metadata-pass.txt", 1, "3.3.7", "560.35.03"),
    ("dcgmi-4.2.3-software-pass.txt", 1, "4.2.3", "570.148.08"),
])
def test_dcgm_passing_table_is_one_pass_event(name, tests, version, driver):
    [event] = events(name)
    f = event.fields
    assert (f["tool"], f["test"], f["result"], f["tests"]) == ("dcgmi", "diag", "pass", tests)
    assert (f.get("dcgm_version"), f.get("driver_version")) == (version, driver)


# ---------------------------------------------------------------- gpu-burn

def test_gpu_burn_faulty_gpus():
    found = events("gpu-burn-faulty-16gpus.txt")
    assert [e.fields["gpu_index"] for e in found] == list(range(16))
    assert {e.fields["result"] for e in found} == {"faulty"}
    by_gpu = {e.fields["gpu_index"]: e for e in found}
    assert by_gpu[1].fields["errors"] == -524288000 and by_gpu[1].text.strip() == "GPU 1: FAULTY"
    assert "errors" not in by_gpu[0].fields  # counted before the last progress line, reset since
    assert not any(e.fields.get("died") for e in found)
    verdict = report("gpu-burn-faulty-16gpus.txt").verdict
    assert (verdict.signature, verdict.cause) == ("health-test-wrong-results", "gpu-memory-ecc")
    assert len(verdict.evidence) == 16


def test_gpu_burn_died_is_not_a_compare_error():
    [event] = events("gpu-burn-died-cublas-gtx1650.txt")
    f = event.fields
    assert (f["tool"], f["result"], f["died"], f["gpu_index"]) == ("gpu-burn", "fail", True, 0)
    assert (f["gpu_name"], f["gpu_uuid"]) == ("GeForce GTX 1650", "GPU-0fccd51a-9bf1-17e7-812c-c1dcf2ca2c42")
    assert f["message"] == 'Failure during compute: Error in "SGEMM": CUBLAS_STATUS_EXECUTION_FAILED'
    assert "errors" not in f  # -1 with (DIED!) is no count
    assert "gpu-memory-ecc" not in causes("gpu-burn-died-cublas-gtx1650.txt")


def test_gpu_burn_all_clients_died():
    found = events("gpu-burn-died-8gpus.txt")
    assert [(e.fields["gpu_index"], e.fields["died"], e.fields["result"]) for e in found] == \
        [(i, True, "fail") for i in range(8)]
    assert causes("gpu-burn-died-8gpus.txt") == []


def test_gpu_burn_died_after_a_failed_init_names_only_that_gpu():
    [event] = events("gpu-burn-died-load-module-k80.txt")  # GPUs 1-3 counted 0 errors
    f = event.fields
    assert (f["gpu_index"], f["died"], f["gpu_name"]) == (0, True, "Tesla K80")
    assert f["message"] == 'Couldn\'t init a GPU test: Error in "load module":'
    assert event.where.line == 14  # the last progress line before the snip


def test_gpu_burn_passing_runs():
    [a2000] = events("gpu-burn-ok-a2000.txt")
    assert (a2000.fields["result"], a2000.fields["gpus"]) == ("pass", 1)
    assert (a2000.where.line, a2000.where.end_line) == (13, 14)
    [v100] = events("gpu-burn-ok-init-error-v100.txt")
    assert (v100.fields["result"], v100.fields["gpus"]) == ("pass", 8)
    assert v100.fields["message"] == "Couldn't init a GPU test: Error: CUDA_ERROR_UNKNOWN"
    assert events("gpu-burn-ok-a500-progress.txt") == []  # progress with no errors and no summary


# ---------------------------------------------------------------- memory testers

def test_cuda_memtest_passing_runs():
    [gtx] = events("cuda_memtest-gtx1050ti-pass.txt")
    f = gtx.fields
    assert (f["tool"], f["result"], f["tests"], f["gpu_index"]) == ("cuda_memtest", "pass", 3, 1)
    assert (f["gpu_name"], f["host"]) == ("GeForce GTX 1050 Ti", "clay--games")
    assert "gpu_serial" not in f  # "serial=unknown (no NVML found)"
    [pro] = events("cuda_memtest-rtxpro6000-pass.txt")
    assert (pro.fields["gpu_serial"], pro.fields["gpu_index"]) == ("1791625015795", 0)
    assert pro.fields["gpu_name"] == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"


@pytest.mark.parametrize(("name", "gpu_name", "tests", "bandwidth_failed"), [
    ("memtestG80-gtx1080-4100mb-counter-wrap.txt", "GeForce GTX 1080", 13, None),
    ("memtestG80-rtx3090-4096mb-counter-wrap.txt", "NVIDIA GeForce RTX 3090", 5, True),
])
def test_memtest_counts_near_two_to_the_32_are_the_tester_failing(name, gpu_name, tests, bandwidth_failed):
    [event] = events(name)
    f = event.fields
    assert (f["tool"], f["result"], f["gpu_index"], f["gpu_name"]) == ("memtestG80", "fail", 0, gpu_name)
    assert (f["implausible"], f["failed_tests"], f["tests"]) == (True, tests, tests)
    assert "errors" not in f and f.get("bandwidth_test_failed") == bandwidth_failed
    assert "Moving Inversions (ones and zeros): 4294967295 errors" in event.text
    assert causes(name) == []


def test_memtest_g80_passing_run():
    [event] = events("memtestG80-p6000-16400mb-pass.txt")
    f = event.fields
    assert (f["result"], f["tests"], f["tested_mb"], f["gpu_name"]) == ("pass", 4, 16400, "Quadro P6000")


# ---------------------------------------------------------------- nccl-tests

@pytest.mark.parametrize(("name", "test", "busbw"), [
    ("nccl-tests-ring-95gbs-pass.txt", None, 95.3009),
    ("nccl-tests-84gbs-pass.txt", None, 84.8558),
    ("nccl-tests-alltoall-1gpu-pass.txt", "alltoall_perf", 0.0),
])
def test_nccl_tests_passing_runs_keep_their_bandwidth_unjudged(name, test, busbw):
    [event] = events(name)
    f = event.fields
    assert (f["tool"], f["result"], f["errors"]) == ("nccl-tests", "pass", 0)
    assert (f["avg_busbw"], f.get("test")) == (busbw, test)
    assert causes(name) == []


def test_nccl_tests_out_of_bounds_values():
    ok, failed = events("nccl-tests-hypercube-out-of-bounds.txt")
    assert (ok.fields["result"], ok.fields["errors"], ok.fields["test"]) == ("pass", 0, "hypercube_perf")
    assert (failed.fields["result"], failed.fields["errors"], failed.fields["test"]) == ("fail", 56, "hypercube_perf")
    assert failed.where.line == 18
    verdict = report("nccl-tests-hypercube-out-of-bounds.txt").verdict
    assert (verdict.signature, verdict.cause) == ("health-test-collective-wrong-data", "nccl-comm-error")


def test_nccl_tests_failure_lines():
    [internal] = events("nccl-tests-internal-error-a6000.txt")
    f = internal.fields
    assert (f["tool"], f["result"], f["host"]) == ("nccl-tests", "fail", "fengyun")
    assert f["message"] == ("NCCL failure common.cu:959 'internal error - please report this issue to the NCCL "
                            "developers / '")
    assert "test" not in f  # only common.cu unwound
    [network] = events("nccl-tests-network-error-kolyoz.txt")
    assert (network.count, network.fields["test"], network.fields["host"]) == (2, "all_reduce_perf", "kolyoz2")
    # the NCCL source explains these; no health-test signature claims hardware
    assert causes("nccl-tests-internal-error-a6000.txt") == ["library-failure"]
    assert causes("nccl-tests-network-error-kolyoz.txt") == ["nccl-comm-error"]


# ---------------------------------------------------------------- healthy outputs

HEALTHY = ("dcgmi-3.0.4-deployment-pass.txt", "dcgmi-3.3.7-metadata-pass.txt", "dcgmi-4.2.3-software-pass.txt",
           "gpu-burn-ok-a2000.txt", "gpu-burn-ok-a500-progress.txt",
           "cuda_memtest-gtx1050ti-pass.txt", "cuda_memtest-rtxpro6000-pass.txt", "memtestG80-p6000-16400mb-pass.txt",
           "nccl-tests-ring-95gbs-pass.txt", "nccl-tests-84gbs-pass.txt", "nccl-tests-alltoall-1gpu-pass.txt")


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_output_gives_no_finding(name):
    analysed = report(name)
    assert analysed.findings == ()
    assert all(e.fields.get("result") == "pass" for e in analysed.events if e.kind == "health-test")


def test_a_burn_that_could_not_start_is_not_healthy():
    """gpu-burn prints OK for GPUs it never tested when CUDA failed to start (0 Gflop/s processed): the verdict is
    that start, CUDA's unknown error at initialisation (wilicc/gpu-burn#60: cuInit's 999, fixed by
    nvidia-modprobe -u)."""
    analysed = report("gpu-burn-ok-init-error-v100.txt")
    assert (analysed.findings[0].signature, analysed.findings[0].cause) == ("cuda-unknown-at-init", "driver-mismatch")


def test_every_data_file_is_read_as_health_tests():
    for path in DATA.glob("*.txt"):
        if path.name == "gpu-burn-ok-a500-progress.txt":
            continue  # progress lines only: nothing to report
        [info] = analyze([str(path)]).inputs
        assert "health-tests" in info.format.split("+"), path.name


def test_health_tests_among_other_logs():
    """A dcgmi table pasted after other text (a job log) is still found, and only the table is the event."""
    table = (DATA / "dcgmi-2.4.6-pcie-nvlink-down.txt").read_text()
    analysed = analyze_text("job 4242 started on node17\n" + table)
    [event] = [e for e in analysed.events if e.kind == "health-test"]
    assert (event.where.line, event.fields["error_code"]) == (3, "DCGM_FR_NVLINK_DOWN")
