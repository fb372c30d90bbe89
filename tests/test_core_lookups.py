"""A deep stack is read by distinct pc, not frame by frame (issue 14's 200,000-frame promise, measured by
benchmarks/bench_core.py): its frames still equal gdb's, and its JSON is what the standard library writes.

The cores are tests/test_unwind.py's, built from tests/data/core/src and crashed at test time.
"""

from __future__ import annotations

import json
import struct
import subprocess
from dataclasses import replace

import pytest

from gdb_oracle import GDB
from postmortem.core import lines
from postmortem.core.lines import SourceLines, aranges
from postmortem.pipeline import analyze
from postmortem.render import json_report
from test_core import GCC, SRC, crash
from test_unwind import PROGRAMS, assert_equal_gdb


@pytest.fixture(scope="module")
def recursion(tmp_path_factory):
    if GCC is None:
        pytest.skip("gcc not installed: the test program cannot be built")
    return crash(tmp_path_factory.mktemp("lookups") / "recurse", "recurse", programs=PROGRAMS)


def test_each_distinct_pc_of_a_recursion_is_symbolized_once(recursion, monkeypatch):
    """Thousands of `recurse` frames share two pcs: symbol and line lookups run once per distinct pc,
    the frames are gdb's (pc and function, in every thread), and the JSON report is byte for byte the
    standard library's `indent=2, ensure_ascii=False` text, also with what orjson refuses (an integer
    past 64 bits)."""
    asked: list[int] = []
    symbol = SourceLines.symbol
    monkeypatch.setattr(SourceLines, "symbol", lambda self, module, vaddr: asked.append(vaddr) or
                        symbol(self, module, vaddr))
    report = analyze([str(recursion)])
    [thread] = report.cores[0].threads
    assert len(thread.frames) > 2000
    assert len(asked) == len(set(asked)) < 20
    if GDB is not None:
        assert_equal_gdb(report, recursion.parent / "recurse", recursion)
    for each in (report, replace(report, facts={**report.facts, "huge": 1 << 70, "name": "Grüße"})):
        assert json_report.render(each) == json.dumps(json_report.as_dict(each), indent=2, ensure_ascii=False) + "\n"


def test_debug_aranges_are_read_as_pyelftools_reads_them(recursion):
    """The program's own `.debug_aranges` (gcc -g writes one): the same (low, high, CU offset) entries as
    pyelftools' parser, and any truncation of it reads without an exception."""
    from elftools.elf.elffile import ELFFile

    with open(recursion.parent / "recurse", "rb") as file:
        elf = ELFFile(file)
        data = elf.get_section_by_name(".debug_aranges").data()
        theirs = sorted((e.begin_addr, e.begin_addr + e.length, e.info_offset)
                        for e in elf.get_dwarf_info().get_aranges().entries)
    assert theirs and aranges(data, "<") == theirs
    for cut in range(len(data)):
        assert all(low <= high for low, high, _ in aranges(data[:cut], "<"))
    wide = struct.pack("<IQ", 0xFFFFFFFF, 52) + struct.pack("<HQBB", 2, 7, 8, 0) + bytes(8) + \
        struct.pack("<QQQQ", 0x1000, 16, 0, 0)  # 64-bit DWARF: 24-byte header padded to 32
    assert aranges(wide, "<") == [(0x1000, 0x1010, 7)]


@pytest.mark.skipif(GCC is None, reason="gcc not installed")
def test_compressed_debug_sections_inflate_chunk_by_chunk_as_pyelftools_inflates_them(tmp_path, monkeypatch):
    """`gcc -gz` (SHF_COMPRESSED, as Debian's debug files are): every DWARF section read through small
    chunks, from every offset, is what pyelftools inflates whole; a cut stream reads short, not wrong."""
    from elftools.elf.elffile import ELFFile

    subprocess.run(["gcc", "-g", "-gz=zlib", "-O0", "-o", "recurse", str(SRC / "recurse.c")], cwd=tmp_path,
                   check=True, capture_output=True)
    monkeypatch.setattr(lines, "INFLATE_CHUNK", 97)
    raw = (tmp_path / "recurse").read_bytes()
    with open(tmp_path / "recurse", "rb") as file:
        elf = ELFFile(file)
        compressed = [s for s in elf.iter_sections() if s.name.startswith(".debug") and s.compressed]
        assert compressed
        for section in compressed:
            whole = section.data()
            body = lines._section_stream(lambda offset, length: raw[offset:offset + length], section, elf)
            assert body is not None and body.read() == whole
            for start in range(0, len(whole), 31):
                body.seek(start)
                assert body.read(200) == whole[start:start + 200]
            end = section["sh_offset"] + section["sh_size"] // 2
            short = lines._section_stream(lambda offset, length, end=end: raw[offset:min(offset + length, end)],
                                          section, elf)
            assert short is not None and whole.startswith(short.read())
