"""Fatbin inventory and verdicts (postmortem.binaries.fatbin), `gpu-arch`, GPU core dumps, library-arch in analyze.

The fatbin fixtures are real nvcc 13.0 builds of tests/data/fatbin/k.cu (build.sh); where nvcc is installed
they are also rebuilt fresh and checked the same way. GPU core dumps are written by tests/nvcudmp_builder.py to
NVIDIA's published layout around a real nvcc cubin (no real dump was at hand).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from postmortem.binaries import cudadump, fatbin, lz4block
from postmortem.binaries.library_arch import judge
from postmortem.cli import main
from postmortem.pipeline import analyze

sys.path.insert(0, str(Path(__file__).parent))
from nvcudmp_builder import Spec, build, lane_tables_sharing_a_region

DATA = Path(__file__).parent / "data" / "fatbin"
DUMP = Path(__file__).parent / "data" / "nvcudmp" / "core_1700000000_node7_4242.nvcudmp"
CORE = Path(__file__).parent / "data" / "core" / "extension.core.zst"

# What build.sh asked nvcc for: per file, per fatbin, the (arch, compression) of each entry.
EXPECTED = {
    "k_multi.o": [[("sm_80", "none"), ("sm_90", "none"), ("compute_120", "zstd"), ("sm_120", "none")]],
    "libk_multi.so": [[("sm_80", "none"), ("sm_90", "none"), ("sm_120", "none")],
                      [("sm_80", "none"), ("sm_90", "none"), ("compute_120", "zstd"), ("sm_120", "none")]],
    "libk_ptx80.so": [[], [("compute_80", "zstd")]],
    "libk_sm80only.so": [[("sm_80", "none")], [("sm_80", "none")]],
    "libk_sm90_ptx120.so": [[("sm_90", "none")], [("sm_90", "none"), ("compute_120", "zstd")]],
    "libk_sm80_ptx80.so": [[("sm_80", "none")], [("compute_80", "zstd"), ("sm_80", "none")]],
    "k_variants.o": [[("sm_90a", "none"), ("sm_120f", "none")]],
    "k_debug.o": [[("compute_90", "zstd"), ("sm_90", "zstd")]],
    "k_none.o": [[("compute_90", "none"), ("sm_90", "none")]],
    "k_speed.o": [[("compute_90", "lz4"), ("sm_90", "none")]],
    "k_balance.o": [[("compute_90", "zstd"), ("sm_90", "none")]],
    "k_size.o": [[("compute_90", "zstd"), ("sm_90", "zstd")]],
}


def _inventory(path: Path, kernels: bool = False) -> fatbin.Inventory:
    read, size, close = fatbin.file_reader(str(path))
    try:
        return fatbin.inventory(read, size, str(path), kernels)
    finally:
        close()


def _layout(found: fatbin.Inventory) -> list[list[tuple[str, str]]]:
    return [[(e.arch, e.compression) for e in fb.entries] for fb in found.fatbins]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_committed_fixtures_list_what_nvcc_was_asked_for(name: str) -> None:
    found = _inventory(DATA / name, kernels=True)
    assert _layout(found) == EXPECTED[name]
    assert found.diagnostics == ()
    for entry in found.fatbins[-1].entries:  # the translation unit's fatbin (a .so's first is the device-link one)
        assert sorted(entry.kernels) == ["_Z5crashPi", "scale"], entry.arch  # every codec decompressed
        assert entry.ptx_isa == ("9.0" if entry.kind == "ptx" else None)
        assert entry.debug == (name == "k_debug.o")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_fresh_nvcc_builds_match_the_flags(tmp_path: Path) -> None:
    subprocess.run(["sh", str(DATA / "build.sh"), str(tmp_path)], check=True, capture_output=True, timeout=600)
    for name, expected in EXPECTED.items():
        assert _layout(_inventory(tmp_path / name)) == expected, name


VERDICTS = {  # formats.md Q7's table, plus sm_80 and the PTX-only library at sm_120
    "libk_multi.so": {80: "native", 86: "native", 90: "native", 100: "missing", 120: "native"},
    "libk_ptx80.so": {80: "ptx-jit", 86: "ptx-jit", 90: "ptx-jit", 100: "ptx-jit", 120: "ptx-jit"},
    "libk_sm80only.so": {80: "native", 86: "native", 90: "missing", 100: "missing", 120: "missing"},
    "k_balance.o": {80: "missing", 86: "missing", 90: "native", 100: "ptx-jit", 120: "ptx-jit"},
    "k_variants.o": {80: "missing", 86: "missing", 90: "native", 100: "missing", 120: "native"},
}


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_verdicts_per_target(name: str) -> None:
    found = _inventory(DATA / name)
    for target, expected in VERDICTS[name].items():
        assert fatbin.library_verdict(found, target)[0].verdict == expected, (name, target)


def test_arch_and_family_variants() -> None:
    assert not fatbin.sass_usable(90, "a", 100) and fatbin.sass_usable(90, "a", 90)
    assert fatbin.sass_usable(120, "f", 121) and not fatbin.sass_usable(120, "f", 100)
    assert not fatbin.sass_usable(80, "", 90)  # SASS never crosses a major version
    assert fatbin.ptx_usable(80, "", 120) and not fatbin.ptx_usable(120, "", 100)


def test_ptx_needs_a_driver_new_enough_for_its_isa() -> None:
    found = _inventory(DATA / "libk_ptx80.so")
    old = fatbin.library_verdict(found, 120, "570.124.06")[0]
    assert old.verdict == "missing" and "needs driver >= 580.65.06" in old.reason
    new = fatbin.library_verdict(found, 120, "580.82.07")[0]
    assert (new.verdict, new.image, new.needs_driver) == ("ptx-jit", "compute_80", "580.65.06")


def test_one_fatbin_without_an_image_fails_the_library() -> None:
    images = ["sm_80 sm_90 sm_120", "sm_80 sm_90"]  # one translation unit built without sm_120
    assert judge(images, 120, None).verdict == "missing"
    assert judge(["sm_80 compute_80@8.8"], 120, "575.51.03").verdict == "ptx-jit"


def test_truncated_file_lists_what_is_there(tmp_path: Path) -> None:
    raw = (DATA / "libk_multi.so").read_bytes()
    second = raw.index(b"\x50\xed\x55\xba", raw.index(b"\x50\xed\x55\xba") + 4)
    cut = tmp_path / "cut.so"
    cut.write_bytes(raw[:second + 16 + 64 + 100])  # the second fatbin keeps its first entry header only
    found = _inventory(cut)
    assert [len(fb.entries) for fb in found.fatbins] == [3, 1]
    assert any("cut off" in d for d in found.diagnostics)
    assert any("past the end" in d for d in found.diagnostics)


def test_entry_size_past_the_end_and_corrupt_payload(tmp_path: Path) -> None:
    raw = bytearray((DATA / "k_balance.o").read_bytes())
    found = _inventory(DATA / "k_balance.o")
    ptx, sass = found.fatbins[0].entries
    raw[ptx.payload_offset + 8:ptx.payload_offset + 40] = b"\xff" * 32  # inside the ZSTD frame
    broken = tmp_path / "broken.o"
    broken.write_bytes(bytes(raw))
    listed = _inventory(broken, kernels=True)
    assert [e.arch for e in listed.fatbins[0].entries] == ["compute_90", "sm_90"]
    assert listed.fatbins[0].entries[0].kernels is None and listed.fatbins[0].entries[1].kernels
    assert any("ZSTD payload corrupt" in d for d in listed.diagnostics)
    raw[sass.offset + 8:sass.offset + 16] = (1 << 27).to_bytes(8, "little")  # padded size far past the file
    broken.write_bytes(bytes(raw))
    listed = _inventory(broken)
    assert [e.arch for e in listed.fatbins[0].entries] == ["compute_90", "sm_90"]
    assert any("past the end" in d for d in listed.diagnostics)


def test_pure_python_lz4_matches_and_rejects_corruption() -> None:
    read, _size, close = fatbin.file_reader(str(DATA / "k_speed.o"))
    try:
        entry = _inventory(DATA / "k_speed.o").fatbins[0].entries[0]
        block = read(entry.payload_offset, entry.compressed_size)
    finally:
        close()
    text = lz4block._decompress(block, entry.uncompressed_size)
    assert b".entry scale" in text and b".target sm_90" in text
    with pytest.raises(lz4block.LZ4Error):
        lz4block._decompress(block[: len(block) // 2], entry.uncompressed_size)
    with pytest.raises(lz4block.LZ4Error):
        lz4block._decompress(b"\x0f\x00", 100)


def test_gpu_arch_command_json_contract(tmp_path: Path) -> None:
    wheel = tmp_path / "ext-1.0-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(DATA / "libk_sm80only.so", "ext/_C.so")
        archive.writestr("ext/__init__.py", "")
    site = tmp_path / "site-packages"
    (site / "pkg").mkdir(parents=True)
    shutil.copy(DATA / "libk_multi.so", site / "pkg" / "libk_multi.so")
    shutil.copy(DATA / "libk_ptx80.so", site / "pkg" / "libk_ptx80.so")
    result = CliRunner().invoke(main, ["gpu-arch", "--target", "RTX 5090", "--driver", "580.82.07",
                                       "--format", "json", str(site), str(wheel)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["target"] == {"sm": "sm_120", "gpu": "RTX 5090"}
    by_name = {Path(lib["library"]).name: lib for lib in out["libraries"]}
    assert {name: lib["verdict"] for name, lib in by_name.items()} == {
        "libk_multi.so": "native", "libk_ptx80.so": "ptx-jit", "_C.so": "missing"}
    assert by_name["_C.so"]["library"].endswith(".whl!/ext/_C.so")
    multi = by_name["libk_multi.so"]["fatbins"]
    assert [(f["verdict"], f["has_kernels"]) for f in multi] == [("no-kernels", False), ("native", True)]
    assert [e["arch"] for e in multi[1]["entries"]] == ["sm_80", "sm_90", "compute_120", "sm_120"]
    assert {e["kind"] for e in multi[1]["entries"]} == {"sass", "ptx"}


def test_gpu_arch_command_text() -> None:
    result = CliRunner().invoke(main, ["gpu-arch", "--target", "sm_100", "--kernels", str(DATA / "libk_sm80only.so"),
                                       str(DATA / "k.cu")])
    assert result.exit_code == 0, result.output
    assert "libk_sm80only.so: cannot run: no SASS for sm_100 and no PTX it can JIT" in result.output
    assert "kernels: _Z5crashPi, scale" in result.output
    assert "0 native, 0 via PTX JIT, 1 cannot run on sm_100" in result.output
    bad = CliRunner().invoke(main, ["gpu-arch", "--target", "Voodoo 5", str(DATA)])
    assert bad.exit_code == 2


# ------------------------------------------------------------------ GPU core dumps


def _dump(tmp_path: Path, name: str = "core_1700000000_node7_4242.nvcudmp", **spec) -> Path:
    path = tmp_path / name
    path.write_bytes(build(Spec((DATA / "k_sm90.cubin").read_bytes(), **spec)))
    return path


def test_committed_dump_matches_the_builder(tmp_path: Path) -> None:
    assert DUMP.read_bytes() == _dump(tmp_path).read_bytes()


def test_gpu_dump_becomes_a_gpu_exception_finding() -> None:
    report = analyze([str(DUMP)])
    event = next(e for e in report.events if e.kind == "gpu-exception")
    f = event.fields
    assert (f["exception"], f["exception_name"]) == (14, "Warp Illegal Address")
    assert (f["kernel"], f["where"]) == ("crash(int*)", "crash(int*)+0x40")
    assert (f["sm_id"], f["warp"], f["lane"], f["block"], f["thread"]) == (17, 9, 5, "(3,0,0)", "(37,0,0)")
    assert (f["grid_dim"], f["block_dim"], f["lanes_faulted"]) == ("(4,1,1)", "(128,1,1)", 2)
    assert (f["gpu_name"], f["sm"], f["sm_count"]) == ("NVIDIA H100 80GB HBM3", "sm_90", 132)
    assert (f["driver_version"], f["cuda_version"], f["pid"]) == ("580.65", "13.0", 4242)
    assert report.findings[0].signature == "gpu-coredump-illegal-address"
    assert "crash(int*)" in report.findings[0].explanation
    assert report.inputs[0].format == "nvcudmp"


def test_unknown_section_and_newer_rows_are_diagnostics(tmp_path: Path) -> None:
    path = _dump(tmp_path, lane_row_size=72, with_metadata=False, extra_sections=[(".cudbg.future", 0x80000040, b"x")])
    report = analyze([str(path)])
    notes = " ".join(report.inputs[0].diagnostics)
    assert "0x80000040" in notes and "rows of 72 bytes" in notes
    event = next(e for e in report.events if e.kind == "gpu-exception")
    assert (event.fields["lane"], event.fields["thread"], event.fields["kernel"]) == (5, "(37,0,0)", "crash(int*)")
    assert "driver_version" not in event.fields


def test_sm_exception_without_lanes_and_short_rows(tmp_path: Path) -> None:
    path = _dump(tmp_path, faulting_lanes=(), exception=6)
    read, size, close = fatbin.file_reader(str(path))
    try:
        dump = cudadump.read_dump(read, size)
    finally:
        close()
    (fields, _text), = cudadump.events_fields(dump, str(path))
    assert (fields["exception_name"], fields["sm_id"],
            fields["kernel"]) == ("Warp Misaligned Address", 17, "crash(int*)")
    truncated = tmp_path / "cut.nvcudmp"
    truncated.write_bytes(path.read_bytes()[:100])
    report = analyze([str(truncated)])
    assert report.inputs[0].diagnostics and not [e for e in report.events if e.kind == "gpu-exception"]


def test_lane_tables_naming_one_region_are_decoded_once(tmp_path: Path) -> None:
    """2,000 more section headers over one 64 KiB region of lane rows: one decoding, the faults of one table."""
    path = tmp_path / "core_1700000000_node7_4242.nvcudmp"
    path.write_bytes(lane_tables_sharing_a_region(_dump(tmp_path).read_bytes(), 64 << 10, 2000))
    read, size, close = fatbin.file_reader(str(path))
    try:
        dump = cudadump.read_dump(read, size)
    finally:
        close()
    copies = (64 << 10) // (32 * 56)  # the 32-lane table, two lanes faulting, repeated
    assert len(dump.faults) == 2 + 2 * copies
    (fields, _text), = cudadump.events_fields(dump, str(path))
    assert (fields["exception_name"], fields["kernel"], fields["lanes_faulted"]) == \
        ("Warp Illegal Address", "crash(int*)", 2 + 2 * copies)


def test_gpu_dump_joins_the_host_core_of_the_same_process(tmp_path: Path) -> None:
    shutil.copy(CORE, tmp_path)
    host = next(e for e in analyze([str(CORE)]).events if e.kind == "core-signal")
    dump = _dump(tmp_path, name=f"core_1700000000_node7_{host.fields['pid']}.nvcudmp")
    report = analyze([str(tmp_path / CORE.name), str(dump)])
    event = next(e for e in report.events if e.kind == "gpu-exception")
    assert event.fields["process"] == host.fields["process"]
    assert "process" in event.fields["joined"]


# ------------------------------------------------------------------ libraries of a core, in analyze


def test_analyze_names_the_library_without_the_gpus_arch(tmp_path: Path) -> None:
    shutil.copy(CORE, tmp_path)
    shutil.copy(DATA / "libk_sm80only.so", tmp_path / "_ops.cpython-311-x86_64-linux-gnu.so")
    (tmp_path / "train.log").write_text(
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n")
    report = analyze([str(tmp_path)])
    library = next(e for e in report.events if e.kind == "library-arch")
    assert (library.fields["verdict"], library.fields["sm"]) == ("missing", "sm_120")
    finding = next(f for f in report.findings if f.signature == "arch-mismatch")
    assert "_ops.cpython-311-x86_64-linux-gnu.so" in finding.explanation
    assert library.id in finding.evidence


def test_library_with_the_gpus_arch_is_not_blamed(tmp_path: Path) -> None:
    shutil.copy(CORE, tmp_path)
    shutil.copy(DATA / "libk_multi.so", tmp_path / "_ops.cpython-311-x86_64-linux-gnu.so")
    (tmp_path / "train.log").write_text(
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is "
        "not compatible with the current PyTorch installation.\n")
    report = analyze([str(tmp_path)])
    library = next(e for e in report.events if e.kind == "library-arch")
    assert (library.fields["verdict"], library.fields["sm"]) == ("native", "sm_120")
    finding = next(f for f in report.findings if f.signature == "arch-mismatch")
    assert "_ops" not in finding.explanation and library.id not in finding.evidence


def test_a_backtrace_names_the_library_without_the_gpus_architecture(tmp_path):
    """The RTX 5090 warning (LeggedLab#26) and a gdb backtrace whose frames name two of our built libraries:
    only the sm_80-only one is blamed. The backtrace text is written by the test in gdb's frame format."""
    sm80, multi = (DATA / "libk_sm80only.so").resolve(), (DATA / "libk_multi.so").resolve()
    bt = tmp_path / "gdb-bt.txt"
    bt.write_text(
        'Thread 1 "python" received signal SIGSEGV, Segmentation fault.\n'
        f"#0  0x00007ffff7a1b2c3 in my_kernel_launch () from {sm80}\n"
        f"#1  0x00007ffff7b1c2d3 in other_launch () from {multi}\n"
        "#2  0x00005555556b7e2d in _PyEval_EvalFrameDefault ()\n")
    warning = Path(__file__).parent / "data" / "framework_log" / "sm120-torch-02.log"
    report = analyze([str(warning), str(bt)])
    top = report.findings[0]
    assert top.cause == "arch-mismatch"
    assert "libk_sm80only.so" in top.explanation and "libk_multi.so" not in top.explanation
    verdicts = {e.fields["library"]: e.fields["verdict"] for e in report.events if e.kind == "library-arch"}
    assert verdicts == {"libk_sm80only.so": "missing", "libk_multi.so": "native"}


# ------------------------------------------------------------------ issue 13: decompression bounds


@pytest.mark.parametrize("claim", [1 << 40, 1 << 63])
def test_a_zstd_entry_claiming_a_huge_image_is_refused_before_any_buffer(claim: int) -> None:
    from hostile.cases_archives import _patched_entry

    data = _patched_entry("k_size.o", "zstd", claim, strip_size=True)
    found = fatbin.inventory(lambda offset, length: data[offset:offset + length], len(data), "k.o", kernels=True)
    ptx, sass = found.fatbins[0].entries
    assert ptx.kernels is None and sass.kernels  # the other entry still gives its kernel names
    assert any(f"inflates to {claim} bytes, more than the {fatbin.MAX_IMAGE}" in d for d in found.diagnostics)


def test_a_zstd_frame_is_not_inflated_past_its_entrys_claim() -> None:
    from hostile.cases_archives import _patched_entry

    data = _patched_entry("k_size.o", "zstd", 100, strip_size=True)  # the frame holds kilobytes
    found = fatbin.inventory(lambda offset, length: data[offset:offset + length], len(data), "k.o", kernels=True)
    assert any("inflates past the 100 bytes its entry states" in d for d in found.diagnostics)


def test_pure_python_lz4_refuses_a_long_match_before_copying() -> None:
    import time

    block = b"\x1f" + b"a" + b"\x01\x00" + b"\xff" * 200_000 + b"\x00"  # one literal, then a 51 MB match
    started = time.monotonic()
    with pytest.raises(lz4block.LZ4Error, match="exceeds the expected 16 bytes"):
        lz4block._decompress(block, 16)
    assert time.monotonic() - started < 0.5  # refused, not copied byte by byte
    assert lz4block._decompress(b"\x1f" + b"a" + b"\x01\x00" + b"\xff\x00" + b"\x00", 275)[-3:] == b"aaa"


def test_a_wheel_with_a_corrupt_member_lists_the_rest(tmp_path: Path) -> None:
    from postmortem.binaries.scan import scan

    real = (DATA / "libk_multi.so").read_bytes()
    wheel = tmp_path / "ext-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ext/libbroken.so", real)
        archive.writestr("ext/libk_multi.so", real)
    data = bytearray(wheel.read_bytes())
    at = data.index(b"ext/libbroken.so") + len(b"ext/libbroken.so") + 200
    data[at:at + 64] = b"\xff" * 64
    wheel.write_bytes(bytes(data))
    found, _empty, notes, _driver = scan([str(wheel)])
    assert [inv.path for inv in found] == [f"{wheel}!/ext/libk_multi.so"]
    assert any("libbroken.so" in n and ("unreadable" in n or "damaged" in n) for n in notes), notes
