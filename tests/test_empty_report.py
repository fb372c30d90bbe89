"""A report with no verdict says why and what to try: an empty directory or a file of nothing postmortem reads lists
every format it reads and the command that produces it (data/input-formats.tsv); exit 0, and no "--format json"."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from postmortem.cli import main
from postmortem.knowledge import data_rows
from postmortem.sources import text_sources
from postmortem.sources.core_file import NAME as CORE_FORMAT

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"


def _analyze(*args: str) -> str:
    result = CliRunner().invoke(main, ["analyze", *args], catch_exceptions=False)
    assert result.exit_code == 0
    assert "--format json" not in result.output
    return result.output


def test_an_empty_directory_says_what_postmortem_reads(tmp_path: Path) -> None:
    output = _analyze(str(tmp_path))
    assert "The inputs hold no files to read." in output
    assert "What postmortem reads, and how to get it:" in output
    assert "  - kernel messages: NVRM Xid and SXid lines" in output and "journalctl -k -b -1 > kern.log" in output
    assert "postmortem collect -o bundle.tar.gz" in output


@pytest.mark.parametrize("path", [ROOT / "LICENSE", ROOT / "pyproject.toml"])
def test_a_file_of_nothing_known_says_what_to_add(path: Path) -> None:
    output = _analyze(str(path))
    assert "Nothing in the 1 input(s) is in a format postmortem reads." in output
    assert "nvidia-smi -q > smi.txt" in output


def test_the_advice_in_the_readers_language(tmp_path: Path) -> None:
    output = _analyze("--lang", "zh-CN", str(tmp_path), str(ROOT / "LICENSE"))
    assert "1 个输入中没有 postmortem 能读取的格式。" in output  # the empty directory adds no input
    assert "内核消息：NVRM Xid 和 SXid 行" in output and "作业的 stderr（调度器的输出文件）" in output


@pytest.mark.parametrize("path", [DATA / "gpu_tools" / "nvsmi-table-a6000x9-550.txt",
                                  DATA / "health_tests" / "gpu-burn-ok-a2000.txt"])
def test_events_without_a_cause_point_at_the_suspects_not_at_json(path: Path) -> None:
    output = _analyze(str(path))
    assert "none matched a known cause. The suspects below" in output and "postmortem explain 'LINE'" in output
    assert "What postmortem reads" not in output


def test_every_format_read_is_in_the_table_once() -> None:
    formats = [row["format"] for row in data_rows("input-formats.tsv")]
    assert len(formats) == len(set(formats))
    assert set(formats) == {source.NAME for source in text_sources()} | {CORE_FORMAT}
    assert all(row["reads"] and row["get"] and row["reads_zh-CN"] for row in data_rows("input-formats.tsv"))


@pytest.mark.parametrize("fmt", ["markdown", "html"])
@pytest.mark.parametrize("path", [ROOT / "LICENSE", ROOT / "pyproject.toml"])
def test_every_report_format_says_what_postmortem_reads(path: Path, fmt: str) -> None:
    """The Markdown of an issue comment and the HTML page give the same advice as the terminal."""
    output = _analyze("--format", fmt, str(path))
    assert "Nothing in the 1 input(s) is in a format postmortem reads." in output
    assert "What postmortem reads, and how to get it" in output and "nvidia-smi -q" in output
    assert all(row["get"].split()[0] in output for row in data_rows("input-formats.tsv"))
