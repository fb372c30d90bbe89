"""compute-sanitizer's XML form gives the same events as its text form; bad XML never raises."""

from __future__ import annotations

from pathlib import Path

from postmortem.pipeline import analyze, analyze_text

DATA = Path(__file__).parent / "data" / "sanitizer_xml"
XML = (DATA / "memcheck-constructed.xml").read_text()
TEXT = """========= Invalid __global__ write of size 4 bytes
=========     at 0x70 in kernel.cu:8:write_values(int *, int)
=========     by thread (0,0,0) in block (1,0,0)
=========     Address 0x7f1c5e000400 is out of bounds
=========
========= Invalid __global__ write of size 4 bytes
=========     at 0x70 in kernel.cu:8:write_values(int *, int)
=========     by thread (1,0,0) in block (1,0,0)
=========     Address 0x7f1c5e000404 is out of bounds
"""
SAME = ("tool", "report", "space", "access", "size", "kernel", "offset", "file", "line", "address",
        "threads", "blocks", "thread", "block", "site")


def errors(report):
    return [e for e in report.events if e.kind == "sanitizer-error"]


def test_xml_records_fold_into_the_event_the_text_form_gives():
    (from_xml,) = errors(analyze([str(DATA / "memcheck-constructed.xml")]))
    (from_text,) = errors(analyze_text(TEXT))
    assert {k: from_xml.fields.get(k) for k in SAME} == {k: from_text.fields.get(k) for k in SAME}
    assert from_xml.count == from_text.count == 2
    assert (from_xml.where.line, from_xml.where.end_line) == (3, 21)


def test_xml_cut_mid_record_keeps_earlier_records_and_says_so():
    cut = XML[: XML.index("<who>", XML.index("0x7f1c5e000404"))]
    report = analyze_text(cut)
    (error,) = errors(report)
    assert error.count == 1 and error.fields["thread"] == "(0,0,0)"
    (note,) = [e for e in report.events if e.kind == "sanitizer-summary"]
    assert note.fields["xml_incomplete"] and note.fields["records"] == 1


def test_xml_entities_are_never_expanded():
    """Parsing starts at the root element, so a DTD before it is never read; defusedxml refuses any other."""
    bomb = ('<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>\n'
            "<ComputeSanitizerOutput>\n<record>\n<what><text>&b;</text></what>\n</record>\n</ComputeSanitizerOutput>\n")
    report = analyze_text(bomb)
    assert errors(report) == []
    (note,) = [e for e in report.events if e.kind == "sanitizer-summary"]
    assert note.fields["records"] == 0 and "entity" in note.fields["problem"]


def test_text_report_cut_mid_report_still_parses():
    report = analyze_text(TEXT[: TEXT.index("=========     by thread (1,0,0)")])
    (error,) = errors(report)
    assert error.count == 2 and error.fields["threads"] == ["(0,0,0)"]
