"""compute-sanitizer and cuda-memcheck reports: memcheck, racecheck, initcheck, synccheck.

Every sanitizer line starts with `========= ` (CI logs and rank launchers put
more in front). A report is a header line ("Invalid __global__ read of size
4 bytes") and the more indented lines under it: where (`at ...`), who (`by
thread ... in block ...`), which address, the host backtrace. A bad kernel
reports once per faulting thread, so identical reports (same check, kernel
and place) fold into one event that keeps the count and the threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from xml.etree.ElementTree import Element, ParseError

import regex
from defusedxml.ElementTree import iterparse

from .. import later
from ..debugging import EXCEPTION_NAMES, exception_number, short_name
from ..knowledge import cuda_error
from ..model import Event
from ..text import Line, TextDoc

NAME = "compute-sanitizer"
ANCHORS = (
    b"Invalid __",
    b"Uninitialized __",
    b"Uninitialized access at",
    b"Race reported between",
    b"hazard detected at __",
    b"Barrier error detected",
    b"Shared or Local Address",
    b"Malloc/Free error",
    b"Leaked ",
    b"Program hit ",
    b"ERROR SUMMARY:",
    b"RACECHECK SUMMARY:",
    b"LEAK SUMMARY:",
    b"Maximum number of hazards",
    b"========= Warp ",
    b"========= Lane ",
    b"========= Device ",
    b"========= Cluster ",
    b"compute-sanitizer ",
    b"cuda-memcheck ",
    b"<ComputeSanitizerOutput",
    b"<record>",
    b"</record>",
)

MAX_REPORT_LINES = 60
"""Lines read under one report header (long host backtraces are cut there)."""
MAX_XML_BYTES = 256 * 1024 * 1024
"""Most bytes of one XML report parsed (a print limit of 10000 records stays far below)."""
MAX_THREADS = 64
"""Distinct threads and blocks kept on a folded event."""

_BAR = later.compile(r"={9}(?= |$)")
_INVALID = later.compile(
    r"Invalid (?P<space>__\w+__|address space) (?P<access>read|write|atomic|access)(?: of size (?P<size>\d+))?")
_UNINIT = later.compile(r"Uninitialized (?P<space>__\w+__) memory (?P<access>read|write)(?: of size (?P<size>\d+))?")
_SHARED_LOCAL = later.compile(r"(?P<what>Out-of-range|Misaligned) Shared or Local Address")
_RACE = later.compile(r"Race reported between (?P<access>\w+) access at "
                      r"(?P<where>.+?)\s*(?:\[(?P<hazards>\d+) hazards?\])?$")
_RACE_MORE = later.compile(r"^and (?P<access>\w+) access at (?P<where>.+?)\s*(?:\[(?P<hazards>\d+) hazards?\])?$")
_HAZARD = later.compile(r"Potential (?P<hazard>\w+) hazard detected at (?P<space>__\w+__) (?P<address>0x[0-9a-fA-F]+)")
_BARRIER = later.compile(r"Barrier error detected\.?\s*(?P<detail>.*)$")
_LEAK = later.compile(r"Leaked (?P<size>\d+) bytes at (?P<address>0x[0-9a-fA-F]+)")
_MALLOC = later.compile(r"Malloc/Free error encountered\s*:?\s*(?P<detail>.*)$")
_PROGRAM_HIT = later.compile(
    r"Program hit (?P<name>\w+)(?: \(error (?P<number>\d+)\))?(?: due to \"(?P<message>[^\"]*)\")?"
    r" on CUDA API call to (?P<api>\w+)")
_SUMMARY = later.compile(r"\b(?P<which>ERROR|RACECHECK|LEAK) SUMMARY: (?P<rest>.+)$")
_COMMAND = later.compile(
    r"^\s*(?:\S*[$#>]\s+)?(?:\S*/)?(?P<tool>compute-sanitizer|cuda-memcheck)(?P<args>(?:\s+\S+)+)\s*$")
_LEVEL = later.compile(r"^(?:Error|Warning|ERROR|WARN|WARNING)\s*:\s*")

_AT_OFFSET = later.compile(r"^at (?P<offset>0x[0-9a-fA-F]+) in (?P<rest>.+)$")
_AT_SYMBOL = later.compile(r"^at (?P<function>.+?)\+(?P<offset>0x[0-9a-fA-F]+)(?: in (?P<file>.+?):(?P<line>\d+))?$")
_FILE_LINE_FUNC = later.compile(r"^(?P<file>[^:]+?\.[\w]+):(?P<line>\d+):(?P<function>.+)$")
_THREAD = later.compile(r"by thread \((?P<thread>[\d, ]+)\) in block \((?P<block>[\d, ]+)\)")
_HAZARD_THREAD = later.compile(r"^(?P<access>Read|Write|Atomic) Thread \((?P<thread>[\d, ]+)\) (?P<where>at .+)$")
_ADDRESS = later.compile(r"^Address (?P<address>0x[0-9a-fA-F]+)(?: is (?P<state>out of bounds|misaligned))?")
_DEVICE_FRAME = later.compile(r"^Device Frame:\s*(?P<frame>.+)$")


@dataclass
class _Report:
    """One report being folded: the first occurrence's lines plus who else hit it."""

    kind: str
    first: Line
    last: Line
    text: str
    fields: dict[str, Any]
    count: int = 1
    threads: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """Reports, summaries and sanitizer runs, with repeated reports folded."""
    folded: dict[tuple, _Report] = {}
    if any("<ComputeSanitizerOutput" in line.text for line in lines):
        yield from _xml(doc, lines, folded)
        return
    tool = None
    consumed: set[int] = set()
    for line in lines:
        if line.number in consumed:
            continue
        run = _run(line.text)
        if run:
            tool = run["tool"]
            yield doc.event("sanitizer-run", line, run)
            continue
        report = _report(doc, line, tool)
        if report is None:
            continue
        consumed.update(range(report.first.number, report.last.number + 1))
        key = _fold_key(report)
        if key in folded:
            _merge(folded[key], report)
        else:
            folded[key] = report
    for report in folded.values():
        yield _event(doc, report)


def _run(text: str) -> dict[str, Any] | None:
    """The sanitizer command line: which tool ran on which program."""
    match = _COMMAND.search(text)
    if not match or "=========" in text:
        return None
    args = match.group("args").split()
    tool = args[args.index("--tool") + 1] if "--tool" in args[:-1] else "memcheck"
    program = next((a for a in reversed(args) if not a.startswith("-")), None)
    return {"tool": tool, "program": program, "runner": match.group("tool")}


def _body(text: str) -> tuple[int, str] | None:
    """(indent, text) of a line after its `=========` bar; None for non-sanitizer lines."""
    bar = _BAR.search(text)
    if not bar:
        return None
    rest = text[bar.end():]
    return len(rest) - len(rest.lstrip(" ")), rest.strip()


def _report(doc: TextDoc, line: Line, tool: str | None) -> _Report | None:
    """The report headed by `line`, with its indented detail lines; None if not a header."""
    body = _body(line.text)
    header = (body[1] if body else line.text.strip())
    header = _LEVEL.sub("", header)
    start = _header(header, tool)
    if start is None or (body is None and start[0] != "sanitizer-error"):
        return None
    kind, fields = start
    block = [line]
    if body is not None:
        for nxt in doc.following(line, MAX_REPORT_LINES):
            detail = _body(nxt.text)
            if detail is None or detail[0] <= body[0] or not detail[1]:
                break
            block.append(nxt)
    report = _Report(kind, line, block[-1], "\n".join(l.text for l in block), fields)
    for nxt in block[1:]:
        detail = _body(nxt.text)
        assert detail is not None  # each line after the first was taken for its detail
        _detail(report, detail[1])
    _finish(report)
    return report


def _header(text: str, tool: str | None) -> tuple[str, dict[str, Any]] | None:
    """Event kind and first fields for a report header line."""
    if m := _INVALID.search(text):
        return "sanitizer-error", _access("memcheck", "invalid-access", m)
    if m := _SHARED_LOCAL.search(text):
        state = "out of bounds" if m.group("what") == "Out-of-range" else "misaligned"
        return "sanitizer-error", {"tool": "memcheck", "report": "invalid-access", "space": "shared-or-local",
                                   "address_state": state}
    if m := _UNINIT.search(text):
        return "sanitizer-error", _access("initcheck", "uninitialized", m)
    if "Uninitialized access at" in text:
        return "sanitizer-error", {"tool": "initcheck", "report": "uninitialized", "space": "host-api"}
    if m := _RACE.search(text):
        return "sanitizer-error", _race(m)
    if m := _HAZARD.search(text):
        return "sanitizer-error", {"tool": "racecheck", "report": "race", "hazard": m.group("hazard"),
                                   "space": m.group("space").strip("_"), "address": m.group("address")}
    if m := _BARRIER.search(text):
        return "sanitizer-error", {"tool": "synccheck", "report": "barrier", "detail": m.group("detail").strip()}
    if m := _LEAK.search(text):
        return "sanitizer-error", {"tool": "memcheck", "report": "leak", "size": int(m.group("size")),
                                   "address": m.group("address")}
    if m := _MALLOC.search(text):
        return "sanitizer-error", {"tool": "memcheck", "report": "malloc-free", "detail": m.group("detail")}
    if m := _PROGRAM_HIT.search(text):
        return "cuda-error", _program_hit(m, tool)
    if m := _SUMMARY.search(text):
        return "sanitizer-summary", _summary(m, tool)
    if "Maximum number of hazards" in text:
        return "sanitizer-summary", {"tool": "racecheck", "hazard_limit_reached": True}
    if (m := EXCEPTION_NAMES.match(text)) and m.end() == len(text.rstrip(".")):
        return "sanitizer-error", {"tool": tool or "memcheck", "report": "hardware-exception",
                                   "exception": exception_number(m.group(0)), "exception_name": m.group(0)}
    return None


def _access(tool: str, report: str, m: regex.Match) -> dict[str, Any]:
    fields: dict[str, Any] = {"tool": tool, "report": report, "space": m.group("space").strip("_"),
                              "access": m.group("access")}
    if m.group("size"):
        fields["size"] = int(m.group("size"))
    return fields


def _race(m: regex.Match) -> dict[str, Any]:
    fields: dict[str, Any] = {"tool": "racecheck", "report": "race", "space": "shared",
                              "access": m.group("access").lower(), "accesses": [_racing(m)]}
    fields.update(_location(m.group("where")))
    return fields


def _racing(m: regex.Match) -> dict[str, Any]:
    access = {"access": m.group("access").lower(), **_location(m.group("where"))}
    if m.group("hazards"):
        access["hazards"] = int(m.group("hazards"))
    return access


def _program_hit(m: regex.Match, tool: str | None) -> dict[str, Any]:
    """`Program hit <error> on CUDA API call to <api>`, error named the runtime way."""
    printed = m.group("name")
    record = cuda_error(printed) or (cuda_error(m.group("number")) if m.group("number") else None)
    fields: dict[str, Any] = {"error": record.name if record else printed, "api": m.group("api"),
                              "tool": tool or "memcheck"}
    if m.group("number"):
        fields["number"] = int(m.group("number"))
    elif printed.isdigit():
        fields["number"] = int(printed)
    if m.group("message"):
        fields["message"] = m.group("message")
    if record and printed != record.name:
        fields["printed_error"] = printed
    return fields


def _summary(m: regex.Match, tool: str | None) -> dict[str, Any]:
    rest = m.group("rest")
    fields: dict[str, Any] = {"tool": {"RACECHECK": "racecheck", "LEAK": "memcheck"}.get(m.group("which"), tool)}
    for number, noun in regex.findall(r"(?<!\d)(\d+) (errors?|warnings?|hazards|bytes|allocations?)", rest):
        fields[noun.rstrip("s") + "s"] = int(number)
    return {k: v for k, v in fields.items() if v is not None}


def _location(where: str) -> dict[str, Any]:
    """Fields of an `at ...` location in any of the formats sanitizer versions print.

    `at 0xc40 in conv.cu:48:convolution(...)`, `at 0x388 in void kernel(...)`,
    `at kernel(...)+0x6320 in file.cuh:118`, `at compress(...)+0x260`.
    """
    where = where.strip()
    if not where.startswith("at "):
        where = "at " + where
    out: dict[str, Any] = {}
    if m := _AT_OFFSET.match(where):
        out["offset"] = m.group("offset")
        rest = m.group("rest")
        if f := _FILE_LINE_FUNC.match(rest):
            out.update(file=f.group("file"), line=int(f.group("line")), function=f.group("function"))
        else:
            out["function"] = rest
    elif m := _AT_SYMBOL.match(where):
        out.update(function=m.group("function"), offset=m.group("offset"))
        if m.group("file"):
            out.update(file=m.group("file"), line=int(m.group("line")))
    if "function" in out:
        out["kernel"] = short_name(out.pop("function"))
    return out


def _detail(report: _Report, text: str) -> None:
    """Add what one indented line says to the report's fields."""
    fields = report.fields
    if text.startswith("at ") and "kernel" not in fields:
        fields.update(_location(text))
    elif m := _THREAD.search(text):
        report.threads.append(_compact(m.group("thread")))
        report.blocks.append(_compact(m.group("block")))
    elif m := _RACE_MORE.match(text):
        fields.setdefault("accesses", []).append(_racing(m))
    elif m := _HAZARD_THREAD.match(text):
        access = {"access": m.group("access").lower(), "thread": _compact(m.group("thread")),
                  **_location(m.group("where"))}
        fields.setdefault("accesses", []).append(access)
        if "kernel" not in fields:
            fields.update({k: access[k] for k in ("kernel", "file", "line", "offset") if k in access})
    elif m := _ADDRESS.match(text):
        fields["address"] = m.group("address")
        if m.group("state"):
            fields["address_state"] = m.group("state")
    elif m := _DEVICE_FRAME.match(text):
        fields.setdefault("frames", []).append(m.group("frame"))


def _finish(report: _Report) -> None:
    """The hazard total of a race over every access pair it lists."""
    accesses = report.fields.get("accesses")
    if accesses:
        hazards = sum(a.get("hazards", 0) for a in accesses)
        if hazards:
            report.fields["hazards"] = hazards


def _compact(triple: str) -> str:
    return "(" + ",".join(part.strip() for part in triple.split(",")) + ")"


def _fold_key(report: _Report) -> tuple:
    """Reports that differ only by thread, block or address are one problem."""
    f = report.fields
    places = tuple((a.get("access"), a.get("kernel"), a.get("offset"), a.get("file"), a.get("line"))
                   for a in f.get("accesses", ()))
    return (report.kind, f.get("tool"), f.get("report"), f.get("space"), f.get("access"), f.get("size"),
            f.get("kernel"), f.get("file"), f.get("line"), f.get("offset"), f.get("error"), f.get("api"),
            f.get("exception"), places, f.get("detail"), report.kind == "sanitizer-summary" and report.first.number)


def _merge(into: _Report, other: _Report) -> None:
    into.count += other.count
    into.threads.extend(t for t in other.threads if t not in into.threads)
    into.blocks.extend(b for b in other.blocks if b not in into.blocks)
    if "hazards" in other.fields:
        into.fields["hazards"] = into.fields.get("hazards", 0) + other.fields["hazards"]


def _event(doc: TextDoc, report: _Report) -> Event:
    fields = dict(report.fields)
    if report.threads:
        fields["threads"] = list(dict.fromkeys(report.threads))[:MAX_THREADS]
        fields["thread"] = report.threads[0]
    fields["site"] = _site(fields)
    if report.blocks:
        fields["blocks"] = list(dict.fromkeys(report.blocks))[:MAX_THREADS]
        fields["block"] = report.blocks[0]
    return doc.event(report.kind, report.first, fields, last=report.last, text=report.text, count=report.count)


def _site(fields: dict[str, Any]) -> str:
    """Where the report points, as a person would look it up: file:line, else kernel+offset."""
    if fields.get("file"):
        return f"{fields['file']}:{fields.get('line', '?')}"
    if fields.get("kernel"):
        return f"{fields['kernel']}+{fields['offset']}" if fields.get("offset") else fields["kernel"]
    return "an unreported location"


# --- XML form (compute-sanitizer --xml yes --save report.xml) -------------------------
class _Stream:
    """The input as a file for the XML parser: read in pieces, never past MAX_XML_BYTES."""

    def __init__(self, doc: TextDoc, start: int):
        self.doc, self.pos = doc, start
        self.end = min(doc.reader.size, start + MAX_XML_BYTES)

    def read(self, size: int = 1 << 16) -> bytes:
        size = min(size if size > 0 else 1 << 16, self.end - self.pos)
        chunk = self.doc.reader.read_at(self.pos, size) if size > 0 else b""
        self.pos += len(chunk)
        return chunk


def _xml(doc: TextDoc, lines: list[Line], folded: dict[tuple, _Report]) -> Iterator[Event]:
    """Records of an XML report as the same events the text form gives; a cut report keeps what came before the cut.

    Records are matched to their `<record>`/`</record>` lines in order, which
    gives each event its line range without the parser's help.
    """
    root = next(line for line in lines if "<ComputeSanitizerOutput" in line.text)
    starts = [line for line in lines if line.text.strip().startswith("<record>")]
    ends = [line for line in lines if "</record>" in line.text]
    count, problem = 0, None
    try:
        for _, element in iterparse(_Stream(doc, root.start), events=("end",)):
            if element.tag != "record":
                continue
            first = starts[count] if count < len(starts) else root
            last = ends[count] if count < len(ends) else first
            count += 1
            report = _xml_record(element, first, last)
            element.clear()
            if report is not None:
                key = _fold_key(report)
                if key in folded:
                    _merge(folded[key], report)
                else:
                    folded[key] = report
    except ParseError as exc:
        problem = f"XML ends or breaks after {count} records ({exc})"
    except ValueError as exc:  # defusedxml refuses DTDs and entity tricks
        problem = f"XML refused: {exc}"
    for report in folded.values():
        yield _event(doc, report)
    if problem:
        yield doc.event("sanitizer-summary", root, {"records": count, "xml_incomplete": True, "problem": problem})


def _xml_record(record: Element, first: Line, last: Line) -> _Report | None:
    """One <record>: what/text is the header the text form prints; where, who and what/address the details."""
    header = (record.findtext("what/text") or "").strip()
    start = _header(_LEVEL.sub("", header), None)
    if start is None:
        return None
    kind, fields = start
    func, pc = record.findtext("where/func"), record.findtext("where/pc")
    if func:
        fields["kernel"] = short_name(func.strip())
    if pc:
        fields["offset"] = pc.strip()
    if path := (record.findtext("where/path") or "").strip():
        fields["file"] = path
        if (line := (record.findtext("where/line") or "").strip()).isdigit():
            fields["line"] = int(line)
    if address := (record.findtext("what/address") or "").strip():
        fields["address"] = address
    if state := next((s for s in ("out of bounds", "misaligned") if s in header), None):
        fields.setdefault("address_state", state)
    text = "\n".join(t.strip() for t in record.itertext() if t.strip())
    report = _Report(kind, first, last, text, fields)
    thread, block = _axes(record.find("who/threadIdx")), _axes(record.find("who/blockIdx"))
    if thread and block:
        report.threads.append(thread)
        report.blocks.append(block)
    _finish(report)
    return report


def _axes(element: Element | None) -> str | None:
    """`<threadIdx><x>3</x><y>0</y><z>0</z></threadIdx>` -> `(3,0,0)`, as the text form prints it."""
    if element is None:
        return None
    values = [(element.findtext(axis) or "0").strip() for axis in ("x", "y", "z")]
    return "(" + ",".join(values) + ")" if all(v.isdigit() for v in values) else None
