"""Excerpts: the part of a report people paste, without the header that usually announces it.

The texts are cut out of real reports (tests/data, with their sources in SOURCES.md there) or
pasted that way in public threads (named below); each must give the same facts as the whole.
"""

from __future__ import annotations

from pathlib import Path

from postmortem.pipeline import analyze_text

DATA = Path(__file__).parent / "data"


def _states(text: str) -> list[dict]:
    return [dict(e.fields) for e in analyze_text(text).events if e.kind == "gpu-state"]


def test_nvsmi_q_section_pasted_alone():
    # https://github.com/leptonai/gpud/pull/80
    pasted = ("This should alert, since this GPU requires a reset to actually remap the rows:\n\n```\n"
              "    Remapped Rows\n        Correctable Error                 : 0\n"
              "        Uncorrectable Error               : 4\n        Pending                           : Yes\n```\n")
    (state,) = _states(pasted)
    assert state["remapped_rows_uncorrectable"] == 4 and state["remap_pending"] is True
    assert analyze_text(pasted).findings[0].cause == "gpu-memory-ecc"


def test_nvsmi_q_sections_cut_from_a_real_report_give_the_report_s_values():
    lines = (DATA / "gpu_tools" / "nvsmi-q-a10-rowremap.txt").read_text().splitlines()
    whole = _states("\n".join(lines) + "\n")[0]
    start = next(i for i, line in enumerate(lines) if line.strip() == "ECC Errors")
    end = next(i for i, line in enumerate(lines) if line.strip().startswith("Remapping Failure Occurred"))
    (excerpt,) = _states("\n".join(lines[start:end + 1]) + "\n")
    for key in ("ecc_volatile_uncorrectable", "remapped_rows_uncorrectable", "remap_pending", "remap_failure"):
        assert excerpt[key] == whole[key], key
    assert "pci" not in excerpt and excerpt["excerpt"] is True


def test_nvsmi_xml_gpu_element_without_its_root():
    text = (DATA / "gpu_tools" / "nvsmi-q-x-a5000-575.xml").read_text()
    fragment = text[text.index("<gpu id="): text.rindex("</gpu>") + len("</gpu>")]
    (whole,) = _states(text)
    (pasted,) = _states("the GPU part of `nvidia-smi -q -x`:\n" + fragment + "\n")
    document_only = {"driver_version", "cuda_version"}  # the root element's, not in the paste
    assert pasted == {k: v for k, v in whole.items() if k not in document_only}


def test_exception_without_its_traceback_header():
    # https://github.com/vllm-project/vllm/issues/24815: only the last lines were pasted
    text = ("RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
            "might be incorrect.\n")
    report = analyze_text(text)
    assert report.findings[0].cause == "illegal-memory-access"


def test_cuda_gdb_backtrace_without_its_session():
    lines = (DATA / "debugger_log" / "cuda-gdb-violetminer.txt").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "CUDA Exception" in line
                 or "received signal CUDA_EXCEPTION" in line)
    excerpt = "\n".join(lines[start:start + 12]) + "\n"
    whole = analyze_text("\n".join(lines) + "\n").findings[0].cause
    assert analyze_text(excerpt).findings[0].cause == whole
