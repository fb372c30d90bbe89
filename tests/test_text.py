"""The text reader under hostile shapes: shrinking files, lone carriage returns, endless lines, storms.

Every test builds the input the way a real writer would (dmesg lines, a tqdm progress bar, log rotation
truncating the file) and runs the real `TextDoc.scan` or the whole pipeline.
"""

from __future__ import annotations

import os

from postmortem import pipeline, text
from postmortem.inputs import Blob
from postmortem.pipeline import analyze
from postmortem.prefilter import Prefilter
from postmortem.reader import BytesReader, FileReader
from postmortem.text import TextDoc

XID13 = "[{t:12.6f}] NVRM: Xid (PCI:0000:3b:00): 13, pid={pid}, name=python, Graphics SM Warp Exception on " \
        "(GPC 1, TPC 0, SM 0): Out Of Range Address\n"
XID79 = "[{t:12.6f}] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus.\n"


def kernel_scan(raw: bytes) -> tuple[TextDoc, list[text.Line]]:
    doc = TextDoc(BytesReader(raw), "dmesg.txt")
    return doc, doc.scan(pipeline.text_prefilter(), pipeline.text_repeats())


class _CountedReads:
    """A reader that fails the test once the scan has read far more often than the file allows."""

    def __init__(self, reader: FileReader, limit: int):
        self.reader, self.size, self.reads, self.limit = reader, reader.size, 0, limit

    def read_at(self, offset: int, length: int) -> bytes:
        self.reads += 1
        assert self.reads < self.limit, "the scan does not move forward"
        return self.reader.read_at(offset, length)


def test_a_file_truncated_while_it_is_read_ends_the_scan_with_a_diagnostic(tmp_path, monkeypatch):
    """Log rotation truncates the file between its size and its read: the scan stops, it never walks back."""
    monkeypatch.setattr(text, "WINDOW", 64)
    path = tmp_path / "kern.log"
    path.write_bytes(b"x" * 300 + b"\n" + XID79.format(t=1.0).encode() * 3)
    with open(path, "rb") as handle:
        reader = _CountedReads(FileReader(handle), limit=100)
        os.truncate(path, 20)  # rotated: only 20 bytes of one long line are left
        doc = TextDoc(reader, str(path))
        assert doc.scan(Prefilter({"k": [b"NVRM: Xid"]})) == []
    assert any("shrank while it was read" in d and "first 20 bytes" in d for d in doc.diagnostics)


def test_lone_carriage_returns_end_lines():
    """A tqdm log is one physical line of redraws: each redraw is a line, and every error in it is found."""
    bar = "".join(f"\r 45%|####      | {i}/1000 [00:10<00:12, 45.0it/s]" for i in range(2000))
    raw = (bar + "\rRuntimeError: CUDA error: an illegal memory access was encountered" + bar
           + "\r" + XID79.format(t=9.0).rstrip("\n") + "\r\n").encode()
    _, lines = kernel_scan(raw)
    texts = {line.number: line.text for line in lines}
    assert texts[2002] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert texts[4003].endswith("GPU has fallen off the bus.")
    report = analyze_text_bytes(raw)
    assert report.findings[0].signature == "xid-79"
    assert any(e.kind == "cuda-error" and e.where.line == 2002 for e in report.events)


def analyze_text_bytes(raw: bytes):
    return pipeline.analyze_blobs([Blob("progress.log", BytesReader(raw))])


def test_crlf_lines_keep_their_numbers_and_context():
    raw = b"first\r\nsecond\r\n" + XID79.format(t=2.0).encode().replace(b"\n", b"\r\n") + b"after\r\n"
    doc, [line] = kernel_scan(raw)
    assert line.number == 3 and line.text.endswith("bus.")
    assert doc.context(3, 3) == (("first", "second"), ("after",))


def test_a_line_longer_than_the_window_is_one_candidate(monkeypatch):
    """One 20 MB line of `NVRM: Xid ` repeated (here scaled to the window) is one candidate line, not thousands."""
    monkeypatch.setattr(text, "WINDOW", 4096)
    raw = b"NVRM: Xid " * 100_000 + b"\n" + XID79.format(t=3.0).encode()
    doc, lines = kernel_scan(raw)
    assert [line.number for line in lines] == [1, 2]
    assert len(lines[0].text) <= text.MAX_LINE and lines[1].text.endswith("bus.")
    assert any("line 1 is longer than" in d for d in doc.diagnostics)


def test_a_storm_folds_as_it_is_read_keeping_first_last_and_count():
    storm = "".join(XID13.format(t=100 + i / 1000, pid=4242) for i in range(5000)) + XID79.format(t=200.0)
    _, lines = kernel_scan(storm.encode())
    assert [(line.number, line.count) for line in lines] == [(1, 4999), (5000, 1), (5001, 1)]
    assert "[  100.000000]" in lines[0].text and "[  104.999000]" in lines[1].text


def test_an_interleaved_storm_folds_each_kind_once():
    """The driver writes Xid 13 lines of several SMs in turn: each repeating line folds, not only neighbours."""
    kinds = [XID13.replace("SM 0", f"SM {sm}") for sm in range(3)]
    storm = "".join(kinds[i % 3].format(t=100 + i / 1000, pid=7) for i in range(3000))
    _, lines = kernel_scan(storm.encode())
    assert len(lines) == 6 and sum(line.count for line in lines) == 3000


def test_lines_of_other_hosts_or_block_headers_never_fold():
    """Only time stamps are masked: another host's line is another line, and a traceback header or frame
    (whose meaning is in the lines after it; a frame may start a traceback pasted without its header) is not an
    anchor that folds."""
    raw = (b"Sep 18 20:07:01 node1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
           b"Sep 18 20:07:01 node2 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
           b"Traceback (most recent call last):\n  File \"a.py\", line 1\nValueError: a\n"
           b"Traceback (most recent call last):\n  File \"b.py\", line 2\nKeyError: b\n")
    _, lines = kernel_scan(raw)
    assert [(line.number, line.count) for line in lines] == [(1, 1), (2, 1), (3, 1), (4, 1), (6, 1), (7, 1)]


def test_past_the_budget_the_most_repeated_shape_gives_way(monkeypatch):
    """Xid 13 lines of 1,000 different pids, then one Xid 79 and one other rare line: with room for 50 lines
    the storm is thinned (its first and latest kept), the rare lines all stay, and a diagnostic says so."""
    monkeypatch.setattr(text, "MAX_HELD_LINES", 50)
    storm = "".join(XID13.format(t=100 + i / 1000, pid=1000 + i) for i in range(1000))
    raw = (XID13.format(t=1.0, pid=1) + "[    2.000000] NVRM: GPU at PCI:0000:3b:00: GPU-8e3bfa57-2c4b-4c5e\n"
           + storm + XID79.format(t=200.0) + "[  201.000000] EDAC MC0: 1 CE memory read error on DIMM_A1\n")
    doc, lines = kernel_scan(raw.encode())
    numbers = [line.number for line in lines]
    assert len(lines) == 50 and {1, 2, 3, 1002, 1003, 1004} <= set(numbers)
    assert any("were not parsed" in d and "most repeated" in d for d in doc.diagnostics)


def test_the_budget_counts_bytes_too(monkeypatch):
    """Long distinct lines fill the byte budget before the line budget."""
    monkeypatch.setattr(text, "MAX_HELD_BYTES", 200_000)
    raw = "".join(f"[{i}.0] NVRM: GPU {i} " + "x" * 7000 + "\n" for i in range(100)).encode()
    _, lines = kernel_scan(raw)
    assert 0 < len(lines) < 15 and lines[-1].number == 100


def test_a_log_of_different_errors_stays_within_the_line_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(text, "MAX_HELD_LINES", 50)
    path = tmp_path / "flood.log"
    path.write_text("".join(f"[{i}.5] NVRM: Xid (PCI:0000:{i % 256:02x}:00): 79, pid={i}, GPU has fallen off the bus.\n"
                            for i in range(400)))
    report = analyze([str(path)])
    assert any("were not parsed" in d for d in report.inputs[0].diagnostics)
    assert sum(1 for e in report.events if e.kind == "xid") <= 50
    assert any(e.where.line == 400 for e in report.events)  # the last report is never what is dropped
