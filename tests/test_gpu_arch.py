"""`gpu-arch` verdicts that can gate CI (issue 15 item 3): kernel-less fatbins, --fail-on, the driver branch, -v.

All fatbins are real nvcc 13.0 builds of tests/data/fatbin/k.cu (build.sh, SOURCES.md): every `-shared` build
carries a device-link fatbin whose cubins define no kernels next to the translation unit's fatbin.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from postmortem.binaries import fatbin
from postmortem.binaries.library_arch import NamedLibrary, judge, library_events
from postmortem.cli import main
from postmortem.knowledge import arch, data_rows

DATA = Path(__file__).parent / "data" / "fatbin"
SHARED = ["libk_multi.so", "libk_sm80only.so", "libk_sm90_ptx120.so", "libk_sm80_ptx80.so"]


def _inventory(name: str) -> fatbin.Inventory:
    read, size, close = fatbin.file_reader(str(DATA / name))
    try:
        return fatbin.inventory(read, size, name)
    finally:
        close()


def _gpu_arch(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["gpu-arch", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize("name", SHARED)
def test_the_device_link_fatbin_of_a_shared_build_is_seen_to_define_no_kernels(name: str) -> None:
    found = _inventory(name)
    assert [fb.has_kernels for fb in found.fatbins] == [False, True]
    assert fatbin.library_verdict(found, 120)[1][0] == fatbin.KERNEL_LESS


@pytest.mark.parametrize(("name", "target", "expected"), [
    ("libk_sm90_ptx120.so", 120, ("ptx-jit", "compute_120")),  # its stub holds sm_90 SASS only
    ("libk_sm80_ptx80.so", 90, ("ptx-jit", "compute_80")),  # its stub holds sm_80 SASS only
    ("libk_sm90_ptx120.so", 90, ("native", "sm_90")),
])
def test_a_kernel_less_fatbin_does_not_decide_the_verdict(name: str, target: int, expected: tuple[str, str]) -> None:
    result = fatbin.library_verdict(_inventory(name), target)[0]
    assert (result.verdict, result.image) == expected


def test_a_core_s_library_images_leave_the_stub_out() -> None:
    """`analyze` judges a core's libraries from their images: the stub's sm_90-only set must not be one."""
    for name, target in (("libk_sm90_ptx120.so", 120), ("libk_sm80_ptx80.so", 90)):
        path = str(DATA / name)
        (event,) = library_events([NamedLibrary(path, "user", path)], "core", 1, "python")
        assert event.fields["fatbins"] == 2 and len(event.fields["fatbin_images"]) == 1
        assert judge(event.fields["fatbin_images"], target, None).verdict == "ptx-jit"


def test_fail_on_gates_a_ci_job() -> None:
    both = [str(DATA / "libk_multi.so"), str(DATA / "libk_sm90_ptx120.so")]
    assert _gpu_arch("--target", "sm_37", str(DATA / "libk_multi.so"))[0] == 0  # the default stays 0
    assert _gpu_arch("--target", "sm_37", "--fail-on", "missing", str(DATA / "libk_multi.so"))[0] == 1
    assert _gpu_arch("--target", "sm_37", "--fail-on", "missing", str(DATA / "k_variants.o"))[0] == 1
    assert _gpu_arch("--target", "sm_120", "--fail-on", "missing", *both)[0] == 0
    assert _gpu_arch("--target", "sm_120", "--fail-on", "ptx-jit", *both)[0] == 1  # libk_sm90_ptx120 only JITs
    assert _gpu_arch("--target", "sm_120", "--fail-on", "ptx-jit", str(DATA / "libk_multi.so"))[0] == 0
    code, output = _gpu_arch("--fail-on", "missing", *both)
    assert code == 2 and "--fail-on needs --target" in output


@pytest.mark.parametrize("name", ["libk_multi.so", "k_variants.o"])  # both carry sm_120 SASS
def test_a_driver_branch_older_than_the_architecture_runs_nothing(name: str) -> None:
    code, output = _gpu_arch("--target", "RTX 5090", "--driver", "535.54.03", "--fail-on", "missing",
                             str(DATA / name))
    assert code == 1
    assert f"{name}: cannot run: driver 535.54.03 predates sm_120 (first supported by R570): nothing runs" in output
    assert _gpu_arch("--target", "RTX 5090", "--driver", "570.124.06", "--fail-on", "missing", str(DATA / name))[0] == 0
    assert fatbin.library_verdict(_inventory(name), 90, "535.54.03")[0].verdict == "native"  # R520 runs Hopper
    assert judge(["sm_120"], 120, "535.54.03").verdict == "missing"  # and `analyze` judges the same


def test_the_first_driver_branches_agree_with_the_other_tables() -> None:
    """Each row: an architecture arch.tsv knows, its first CUDA release, that release's oldest driver."""
    toolkit_drivers = {row["cuda"]: row["min_linux_driver"] for row in data_rows("ptx-isa.tsv")}
    rows = data_rows("arch-drivers.tsv")
    assert {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"} <= {row["sm"] for row in rows}
    for row in rows:
        known = arch(row["sm"])
        assert known is not None and known.min_cuda == row["first_cuda"], row
        assert row["oldest_driver"].split(".")[0] == row["first_branch"], row
        assert toolkit_drivers.get(row["first_cuda"], row["oldest_driver"]) == row["oldest_driver"], row


def test_the_summary_comes_first_and_fatbins_only_with_verbose() -> None:
    args = ["--target", "sm_120", *(str(DATA / n) for n in SHARED)]
    code, output = _gpu_arch(*args)
    lines = output.splitlines()
    assert code == 0 and lines[1] == "4 libraries with device code: 1 native, 2 via PTX JIT, 1 cannot run on sm_120"
    assert len(lines) == 2 + len(SHARED) and "fatbin 1 at" not in output
    assert "libk_sm90_ptx120.so: runs via PTX JIT from compute_120" in output
    assert "(1 fatbin(s) without kernels left out)" in lines[2]
    verbose = _gpu_arch("-v", *args)[1]
    assert "  fatbin 1 at 0x2018, 1 entries  -> no-kernels" in verbose
    assert verbose.count("fatbin 2 at") == len(SHARED) and verbose.splitlines()[:2] == lines[:2]


def test_a_cubin_without_a_symbol_table_is_not_taken_for_a_stub(tmp_path: Path) -> None:
    """Kernels unknown is not kernels absent: the stub of a real build, its `.symtab` renamed away, counts again."""
    raw = bytearray((DATA / "libk_sm90_ptx120.so").read_bytes())
    stub = _inventory("libk_sm90_ptx120.so").fatbins[0]
    at = raw.index(b".symtab\0", stub.offset, stub.offset + 16 + stub.size)
    raw[at:at + 7] = b".nosymt"
    (tmp_path / "stripped.so").write_bytes(bytes(raw))
    read, size, close = fatbin.file_reader(str(tmp_path / "stripped.so"))
    try:
        found = fatbin.inventory(read, size, "stripped.so")
    finally:
        close()
    assert [fb.has_kernels for fb in found.fatbins] == [None, True]
    assert fatbin.library_verdict(found, 120)[0].verdict == "missing"
