"""compute-sanitizer, gdb/cuda-gdb and systemd-coredump sources on real public output."""

from __future__ import annotations

from pathlib import Path

import pytest

from postmortem.debugging import crash_site, exception_number, short_name
from postmortem.pipeline import analyze

DATA = Path(__file__).parent / "data" / "debugger_log"


def events(name: str, kind: str):
    return [e for e in analyze([str(DATA / name)]).events if e.kind == kind]


def verdict(*names: str) -> str:
    report = analyze([str(DATA / n) for n in names])
    return report.verdict.cause if report.verdict else "unknown"


@pytest.mark.parametrize("signature, expected", [
    ("void convert_unary<float, __half>(void const*, __half*, long)<<<(32,1,1),(256,1,1)>>>",
     "convert_unary<float, __half>"),
    ("void marian::reduceSinglePass<unsigned int=512, bool=0>(marian::functional::elem::Mult, float*, marian",
     "marian::reduceSinglePass<unsigned int=512, bool=0>"),
    ("compress(const unsigned int *, const unsigned int *, uint2 *, int)", "compress"),
    ("(anonymous namespace)::worker(int)", "(anonymous namespace)::worker"),
])
def test_short_name_drops_return_type_and_parameters(signature, expected):
    assert short_name(signature) == expected


def test_exception_numbers_follow_cudadebugger_h():
    assert exception_number("Warp Illegal Address") == 14
    assert exception_number("Warp Out-of-range Address") == 5
    assert exception_number("Not An Exception") is None


def test_crash_site_skips_runtime_frames():
    frames = [{"function": "raise", "module": "libc.so.6"}, {"function": "_ZSt9terminatev", "module": "libstdc++.so.6"},
              {"function": "PyThread_exit_thread", "module": "libpython3.11.so.1.0"}]
    assert crash_site(frames) == {"top_frame": "PyThread_exit_thread", "top_module": "libpython3.11.so.1.0"}


def test_initcheck_report_with_location_thread_and_address():
    (event,) = events("initcheck-convolution.txt", "sanitizer-error")
    f = event.fields
    assert (f["tool"], f["report"], f["space"], f["access"],
            f["size"]) == ("initcheck", "uninitialized", "global", "read", 1)
    assert (f["file"].rsplit("/", 1)[-1], f["line"], f["kernel"]) == ("convolution.cu", 48, "convolution")
    assert (f["thread"], f["block"], f["address"]) == ("(3,3,0)", "(0,0,0)", "0x7fa8e5002048")
    assert (event.where.line, event.where.end_line) == (2, 26)
    assert "Uninitialized __global__ memory read of size 1 bytes" in event.text


def test_cuda_memcheck_out_of_bounds_write_with_cut_kernel_name():
    (event,) = events("memcheck-marian.txt", "sanitizer-error")
    f = event.fields
    assert (f["report"], f["access"], f["size"], f["address_state"]) == ("invalid-access", "write", 4, "out of bounds")
    assert f["kernel"].startswith("marian::reduceSinglePass<") and f["block"] == "(79,0,0)"


def test_ci_indented_report_and_sanitizer_command_line():
    (run,) = events("memcheck-cccl-ci.txt", "sanitizer-run")
    assert run.fields["tool"] == "memcheck" and run.fields["program"].endswith("device_batch_copy")
    (error,) = events("memcheck-cccl-ci.txt", "sanitizer-error")
    assert (error.fields["space"], error.fields["access"], error.where.line) == ("global", "read", 4)


def test_racecheck_pairs_hazards_and_limit():
    races = events("racecheck-dxtc2.txt", "sanitizer-error")
    assert [r.where.line for r in races] == [4, 8]
    first = races[0].fields
    assert first["kernel"] == "compress" and first["hazards"] == 294291 + 294127
    assert [a["offset"] for a in first["accesses"]] == ["0x260", "0x200", "0x2b0"]
    (limit,) = events("racecheck-dxtc2.txt", "sanitizer-summary")
    assert limit.fields["hazard_limit_reached"] is True


def test_racecheck_with_source_lines():
    (race,) = events("racecheck-cudf.txt", "sanitizer-error")
    assert [(a["file"], a["line"])
            for a in race.fields["accesses"]] == [("page_string_decode.cu", 455), ("delta_binary.cuh", 208)]


def test_identical_reports_fold_into_one_event_with_threads():
    one = (DATA / "synccheck-julia.txt").read_text()
    second = one.replace("by thread (2,0,0)", "by thread (3,0,0)")
    report = analyze_text_events(one + second)
    (event,) = [e for e in report if e.kind == "sanitizer-error"]
    assert event.count == 2 and event.fields["threads"] == ["(2,0,0)", "(3,0,0)"]
    assert event.fields["report"] == "barrier" and event.fields["kernel"] == "ptxcall_computeBetasAndGradKernel_3"


def analyze_text_events(text: str):
    from postmortem.pipeline import analyze_text
    return analyze_text(text).events


def test_cuda_gdb_exception_with_trigger_pc_focus_and_location():
    (event,) = events("cuda-gdb-violetminer.txt", "gpu-exception")
    f = event.fields
    assert (f["exception"], f["exception_name"], f["kernel"]) == (5, "Warp Out-of-range Address", "argon2Kernel")
    assert (f["trigger_pc"], f["device"], f["sm_id"], f["warp"],
            f["block"]) == ("0x7fffcc5cb920", 0, 17, 22, "(0,0,57)")
    assert (event.where.line, event.where.end_line) == (14, 19)


def test_cuda_gdb_exception_without_trigger_line_gets_number_from_signal():
    (event,) = events("cuda-gdb-gipuma.txt", "gpu-exception")
    assert event.fields["exception"] == 5 and event.fields["kernel"] == "gipuma_init_cu2<float>"


def test_cuda_gdb_focus_without_exception_folds_repeats():
    foci = events("cuda-gdb-nccl-spin.txt", "gpu-focus")
    assert [(e.fields["thread"], e.count) for e in foci] == [("(0,0,0)", 2), ("(32,0,0)", 2), ("(64,0,0)", 1)]
    assert "ld.volatile.global" in foci[2].fields["source"]


def test_thread_apply_all_bt_folds_identical_threads():
    stacks = events("cuda-gdb-llamaserver.txt", "backtrace")
    assert sum(e.count for e in stacks) == 11
    main = next(e for e in stacks if e.fields.get("thread") == "1")
    assert "ggml_cuda_op_mul_mat" in main.fields["functions"] and main.fields["lwp"] == 1716680
    assert all("signal" not in e.fields for e in stacks)  # a CUDA exception is not a host signal


def test_gdb_frames_keep_module_and_source_line():
    (stack, _) = events("gdb-nccl-abort.txt", "backtrace")
    frame = stack.fields["frames"][11]
    assert (frame["function"], frame["file"],
            frame["line"]) == ("ncclStrongStreamSynchronize", "misc/strongstream.cc", 270)
    assert stack.fields["frames"][10]["module"].endswith("libcudart.so.11.0")
    assert stack.fields["thread"] == "58" and stack.where.line == 1


def test_signal_goes_to_the_backtrace_after_it():
    (stack,) = events("gdb-segv-exit.txt", "backtrace")
    assert (stack.fields["signal"], stack.fields["top_module"]) == ("SIGSEGV", "libcudart.so.10.1")
    assert "__cudaUnregisterBinaryUtil" in stack.fields["top_frame"]


def test_core_session_keeps_one_stack_for_stop_and_bt():
    (stack,) = events("gdb-core-libcwd.txt", "backtrace")
    assert stack.fields["signal"] == "SIGABRT" and stack.fields["top_frame"] == "libcwd::core_dump"


def test_quoted_backtrace_reads_past_the_quote_marks():
    (stack,) = events("gdb-faiss-quoted.txt", "backtrace")
    assert len(stack.fields["frames"]) == 6 and stack.fields["process"] == "demo_ivfpq_inde"


def test_coredumpctl_info_fields_and_stack():
    (dump,) = events("coredumpctl-info-vkcube.txt", "coredump")
    f = dump.fields
    assert (f["pid"], f["signal"], f["executable"], f["host"]) == (4573, "SIGSEGV", "/usr/bin/vkcube", "solus-pc")
    assert f["frames"][1] == {"index": 1, "pc": "0x000056248efe1ad9", "function": "demo_prepare_buffers",
                              "module": "vkcube", "offset": "0x7ad9"}
    assert f["top_module"] == "libnvidia-glcore.so.560.35.03" and dump.time.year == 2024


def test_journal_stack_without_header():
    (dump,) = events("coredump-stack.txt", "coredump")
    assert dump.fields["thread"] == 13508 and len(dump.fields["frames"]) == 12
    assert dump.fields["top_frame"] == "PyThread_exit_thread"


@pytest.mark.parametrize("files, cause", [
    (["initcheck-convolution.txt"], "uninitialized-read"),
    (["memcheck-marian.txt"], "illegal-memory-access"),
    (["memcheck-cccl-ci.txt"], "illegal-memory-access"),
    (["racecheck-dxtc2.txt"], "kernel-race"),
    (["synccheck-julia.txt"], "barrier-misuse"),
    (["cuda-gdb-violetminer.txt"], "illegal-memory-access"),
    (["cuda-gdb-llamaserver.txt"], "illegal-memory-access"),
    (["cuda-gdb-nccl-spin.txt"], "nccl-timeout"),
    (["gdb-nccl-abort.txt"], "nccl-timeout"),
    (["gdb-segv-exit.txt"], "native-crash"),
    (["coredump-head.txt", "coredump-stack.txt"], "native-crash"),
])
def test_verdicts(files, cause):
    assert verdict(*files) == cause


def test_noise_lines_with_anchor_words_make_no_events():
    text = "========== 3 passed in 0.1s ==========\nmy_function (#0  of 3)\nProgram hit the wall\n"
    kinds = {e.kind for e in analyze_text_events(text)}
    assert not kinds & {"sanitizer-error", "backtrace", "coredump", "gpu-exception"}


def test_info_cuda_kernels_rows_become_gpu_kernel_events():
    (kernel,) = events("cuda-gdb-info-kernels-chroma.txt", "gpu-kernel")
    assert kernel.where.line == 10
    assert (kernel.fields["kernel_id"], kernel.fields["device"], kernel.fields["grid"]) == (5, 0, 6)
    assert (kernel.fields["grid_dim"], kernel.fields["block_dim"]) == ("(4801,1,1)", "(64,1,1)")
    assert kernel.fields["kernel"] == "render" and kernel.fields["focus"] is True
    assert kernel.fields["status"] == "Active" and "parent" not in kernel.fields
