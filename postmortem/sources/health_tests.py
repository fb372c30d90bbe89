"""Results of the GPU health tests admins run after a crash: DCGM diagnostics, gpu-burn, memory testers, nccl-tests.

Each test's verdict becomes a `health-test` event with `tool` (dcgmi, dcgm, gpu-burn, cuda_memtest,
memtestG80, memtestCL, nccl-tests), `test`, `result` (pass, fail, warn, faulty), `gpu_index` where the
tool names a GPU, and what the tool counted or said (`errors`, `message`):

- `dcgmi diag` tables: a failing or warning row (`| GPU Memory | Fail - GPU: 0 |`, `| GPU0: Fail |`) and
  the `Warning`/`Error` rows under it are one event. DCGM's text output does not print the failure
  reason's code, but its messages are the DCGM_FR_* formats of data/dcgm-fr.tsv, so the code
  (`error_code`, `error_id`) and what it means for us (`error_cause`) are read back from the message.
  `dcgmi diag -j` warnings carry the numeric `error_id` themselves, and any other line that names a
  `DCGM_FR_*` code (a health monitor's event) is read with it (tool `dcgm`).
- gpu-burn: a `GPU N: FAULTY` line of the summary, with the error count of its progress lines; a GPU
  whose test process died (`(DIED!)`: the count is then garbage, not compare errors) is `died`.
- cuda_memtest `ERROR: (...) N errors found in block B` reports, summed per GPU and test; memtestG80 and
  memtestCL per-test error counts, summed per run. A count within 2^16 of 2^32 is the tester's own
  counter going below zero (a failed allocation; memtestG80 prints it for every test above 4 GiB), so
  it is kept as `implausible`, not as bad memory.
- nccl-tests: `# Out of bounds values : N FAILED` (the data a collective moved came back wrong) with the
  run's `# Avg bus bandwidth`, and `Test NCCL failure` lines. Bandwidth is recorded, never judged: the
  output holds no reference for what the links allow.

A healthy run makes one `pass` event (a DCGM table, a gpu-burn summary, a memory test run, an
nccl-tests run), so a report can say the GPU was tested and passed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache

import regex

from .. import later
from ..knowledge import code_fields, dash, data_rows
from ..model import Event
from ..text import Line, TextDoc

NAME = "health-tests"
KIND = "health-test"

ANCHORS: tuple[bytes, ...] = (
    b"| Diagnostic ", b"-----  ", b'"error_id"', b"DCGM_FR_",                                   # DCGM
    b"proc'd: ", b"Tested ", b"(UUID: GPU-", b"No clients are alive", b"Failure during compute",
    b"Couldn't init a GPU test",                                                               # gpu-burn
    b"]:ERROR: ", b"]:Running cuda memtest", b"]:Device name=", b"]:Attached to device", b"]:Test",  # cuda_memtest
    b"of tests over ", b" errors (", b"errors so far", b"Final error count", b"Test failed!",   # memtestG80/CL
    b"Out of bounds values", b"Avg bus bandwidth", b"Test NCCL failure", b"Test CUDA failure", b"_perf",  # nccl-tests
)

SPAN = 60
"""Longest run of lines an event's text spans; a longer one keeps its first line only."""


# ---------------------------------------------------------------- DCGM failure reasons (data/dcgm-fr.tsv)

@dataclass(frozen=True)
class FailureReason:
    """One DCGM_FR_* code of data/dcgm-fr.tsv."""

    code: int
    name: str
    meaning: str
    cause: str | None
    category: str
    message: str | None


@cache
def failure_reasons() -> dict[int, FailureReason]:
    """The table by code, loaded once."""
    return {int(row["code"]): FailureReason(int(row["code"]), row["name"], row["meaning"], dash(row["cause"]),
                                            row["category"], dash(row["message"]))
            for row in data_rows("dcgm-fr.tsv")}


_RENAMED = (("DCGM_FR_CLOCKS_EVENT_VIOLATION", "DCGM_FR_THROTTLING_VIOLATION"),
            ("DCGM_FR_CLOCKS_EVENT_", "DCGM_FR_CLOCK_THROTTLE_"))
"""DCGM 3.3 renamed clock throttling to clock events (dcgmlib/src/dcgm_errors.c); the codes are the same."""


def reason_named(name: str) -> FailureReason | None:
    """The reason a DCGM_FR_* name stands for, under its old or new spelling."""
    for new, old in _RENAMED:
        if name.startswith(new):
            name = old + name[len(new):]
    return next((r for r in failure_reasons().values() if r.name == name), None)


_FORMAT = later.compile(r"%%|%[-+ #0]*+\d*+(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L)?[diouxXfeEgGsc]")
_NUMBER = r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_FIXED = r"(?:-?\d+\.\d+|-?nan|-?inf)"
"""%f and %.Nf always print a decimal point: "Detected 2 ... for GPU 0" is the %ld format, not the %.1f one."""
FIELD_MAX = 256
"""Most characters a `%s` inside a message spans (an API or test name, a path, an error string): bounded, so a line
holding the words before it many times costs each copy this much, not a scan of the rest of the line."""
_FIELD = rf".{{0,{FIELD_MAX}}}?"
_BLANK = r"\s+"
_DECIMAL, _HEX = (r"-?\d+", r"(?<!\d)"), (r"[0-9a-fA-F]+", r"(?<![0-9a-fA-F])")
_CONVERSIONS = {"d": _DECIMAL, "i": _DECIMAL, "u": (r"\d+", r"(?<!\d)"), "o": (r"\d+", r"(?<!\d)"), "x": _HEX,
                "X": _HEX, "f": (_FIXED, r"(?<!\d)"), "e": (_NUMBER, r"(?<!\d)"), "E": (_NUMBER, r"(?<!\d)"),
                "g": (_NUMBER, r"(?<!\d)"), "G": (_NUMBER, r"(?<!\d)"), "s": (_FIELD, ""), "c": (r".", "")}
"""Each conversion's regex, and where one that starts a message may start: a number at its first digit only, for
from every digit of a run it would rescan the run."""
MIN_LITERAL = 15
"""Characters of fixed wording a message format needs before it names a code on its own."""


def _format_regex(message: str) -> tuple[str, int]:
    """A printf format as a regex (whitespace loosened, as a wrapped table cell needs), and its literal length.

    Built linear (the same matches, fields of FIELD_MAX characters at most): the blanks around a `%s` are its
    one-character ends (`\\s+.*?\\s+` splits a blank run every way), a leading number starts where its digits do
    (_CONVERSIONS) and a leading `%s` where the line does."""
    message = message.strip()
    texts, conversions, pos = [], [], 0
    for m in _FORMAT.finditer(message):
        texts.append(message[pos:m.start()])
        conversions.append(m[0])
        pos = m.end()
    texts.append(message[pos:])
    loose = [regex.sub(r"\\\s+|\s+", r"\\s+", regex.escape(text)) for text in texts]
    parts = [loose[0]]
    for at, conversion in enumerate(conversions):
        field, guard = ("%", "") if conversion == "%%" else _CONVERSIONS[conversion[-1]]
        after = loose[at + 1]
        if field == _FIELD and ((at == 0 and not parts[0]) or parts[-1].endswith(_BLANK)) and after.startswith(_BLANK):
            after = r"\s" + after[len(_BLANK):]
            if parts[-1].endswith(_BLANK):
                parts[-1] = parts[-1][: -len(_BLANK)] + r"\s"
        if at == 0 and not parts[0]:
            field, guard = (r".*?", r"(?<![^\n])") if field == _FIELD else (field, guard)
            parts[0] = guard
        parts += [field, after]
    return "".join(parts), sum(len(text.strip()) for text in texts)


@cache
def _message_patterns() -> tuple[tuple[regex.Pattern, FailureReason], ...]:
    """Formats that name one code: long enough, and not shared by another code ("Detected %ld %s for GPU %u")."""
    by_pattern: dict[str, list[FailureReason]] = {}
    for reason in failure_reasons().values():
        if reason.message:
            pattern, literal = _format_regex(reason.message)
            if literal >= MIN_LITERAL:
                by_pattern.setdefault(pattern, []).append(reason)
    return tuple((later.compile(p), found[0]) for p, found in by_pattern.items() if len(found) == 1)


_CODE = later.compile(r"\bDCGM_FR_[A-Z0-9_]+\b")


def reasons_in(message: str) -> list[FailureReason]:
    """The DCGM failure reasons a message names or is worded as, in the order they appear."""
    found: list[tuple[int, FailureReason]] = []
    for m in _CODE.finditer(message):
        if reason := reason_named(m[0]):
            found.append((m.start(), reason))
    worded: dict[int, list[FailureReason]] = {}
    for pattern, reason in _message_patterns():
        if hit := pattern.search(message):
            worded.setdefault(hit.start(), []).append(reason)
    found += [(start, said[0]) for start, said in worded.items() if len(said) == 1]  # two readings: neither
    reasons: list[FailureReason] = []
    for _, reason in sorted(found, key=lambda item: item[0]):
        if reason not in reasons:
            reasons.append(reason)
    return reasons


def _reason_fields(reasons: list[FailureReason]) -> dict:
    """error_code/error_id/error_cause of the reason that says most (the first with a cause), and all codes."""
    if not reasons:
        return {}
    main = next((r for r in reasons if r.cause), reasons[0])
    fields = {"error_code": main.name, "error_id": main.code, "error_meaning": main.meaning,
              "error_category": main.category, "error_cause": main.cause}
    if len(reasons) > 1:
        fields["error_codes"] = [r.name for r in reasons]
    return fields


# ---------------------------------------------------------------- helpers

def _event(doc: TextDoc, first: Line, fields: dict, last: Line | None = None) -> Event:
    """A health-test event over first..last (first alone when that is too long to show); None fields dropped."""
    if last is not None and (last.number <= first.number or last.number - first.number > SPAN):
        last = None
    return doc.event(KIND, first, {k: v for k, v in fields.items() if v is not None}, last=last)


_GPU_IN_TEXT = later.compile(r"\bGPU\s?(\d{1,3})\b")


# ---------------------------------------------------------------- dcgmi diag (text table)

_SECTION = later.compile(r"^\s*[+|]-{5}\s+(?P<section>[A-Za-z][\w /]*?)\s+-+[+|]")
_HEADER = later.compile(r"^\s*\|\s*Diagnostic\s*\|\s*Result\s*\|")
_ROW = later.compile(r"^\s*\|(?P<name>[^|]*)\|(?P<info>.*?)\s*$")
_RESULT = later.compile(r"^(?P<result>Pass|Fail|Warn|Skip|Not Run)(?:\s*-\s*(?:GPU:?\s*(?P<gpus>\d+(?:\s*,\s*\d+)*)"
                        r"|(?P<all>All)))?$")
_RESULT_PER_GPU = later.compile(r"^GPU\s?(?P<gpu>\d+):\s*(?P<result>Pass|Fail|Warn|Skip)$")
_NOTE = later.compile(r"^(?P<kind>Warning|Error|Info)\b")
_RESULTS = {"Fail": "fail", "Warn": "warn", "Pass": "pass", "Skip": "skip", "Not Run": "skip"}


@dataclass
class _Test:
    name: str
    section: str | None
    first: Line
    last: Line
    results: list[tuple[int | None, str]] = field(default_factory=list)
    notes: list[list] = field(default_factory=list)
    """[kind, [raw cell pieces]] per Warning/Error/Info row."""


CELL_WIDTH = 45
"""Characters of a message per row of a dcgmi result cell (`| %-45s  |`); a row cut off before its bar has no width."""


def _cell(info: str) -> tuple[str, int]:
    """A result cell as dcgmi wrote it (its padding kept), and how many message characters a row of it holds."""
    if info.endswith("|"):
        text = info[:-1]
        return text, max(1, len(text) - 3)
    return info, CELL_WIDTH


def _join(pieces: list[tuple[str, int]]) -> str:
    """A message dcgmi cut into fixed-width rows (mid-word, `Reset GPU. R` / `estart DCGM`), joined back."""
    text = "".join(cell[1:1 + width] for cell, width in pieces[:-1]) + pieces[-1][0][1:]
    return regex.sub(r"\s+", " ", text).strip().rstrip(",;").rstrip()


def _dcgmi_tables(doc: TextDoc, lines: list[Line], covered: set[int]) -> Iterator[Event]:
    until = 0
    for line in lines:
        if line.number <= until or not (_SECTION.match(line.text) or _HEADER.match(line.text)):
            continue
        block = _table_rows(doc, line)
        until = block[-1].number
        covered.update(range(line.number, until + 1))
        yield from _table_events(doc, block)


TABLE_ROWS = 5000
"""Most rows read for one dcgmi table (a few dozen per GPU group)."""


def _table_rows(doc: TextDoc, first: Line) -> list[Line]:
    """`first` and the table rows (`|`, `+`) that follow it, read a few at a time."""
    block = [first]
    while len(block) < TABLE_ROWS:
        batch = doc.following(block[-1], 32)
        for nxt in batch:
            if not nxt.text.lstrip().startswith(("|", "+")):
                return block
            block.append(nxt)
        if len(batch) < 32:
            break
    return block


def _table_events(doc: TextDoc, block: list[Line]) -> Iterator[Event]:
    section, tests, meta = None, [], {}
    current: _Test | None = None
    note: list | None = None
    for line in block:
        if m := _SECTION.match(line.text):
            section, current, note = m["section"], None, None
            continue
        if _HEADER.match(line.text) or not (m := _ROW.match(line.text)):
            continue
        name, raw = m["name"].strip(), _cell(m["info"])
        info = raw[0].strip()
        if section == "Metadata" and name:
            meta[name] = info
            continue
        if name and (n := _NOTE.match(name)):
            if current is not None:
                note = [n["kind"].lower(), [raw]]
                current.notes.append(note)
                current.last = line
            continue
        if name:
            current, note = _Test(name, section, line, line), None
            tests.append(current)
        elif current is None:
            continue
        result = _RESULT.match(info) or _RESULT_PER_GPU.match(info)
        if result is not None:
            note = None
            groups = result.groupdict()
            gpus = ([int(groups["gpu"])] if groups.get("gpu")
                    else [int(g) for g in regex.findall(r"\d+", groups["gpus"])] if groups.get("gpus") else [None])
            current.results.extend((gpu, _RESULTS[result["result"]]) for gpu in gpus)
        elif note is not None and not name:
            note[1].append(raw)
        current.last = line
    common = {"tool": "dcgmi", "dcgm_version": meta.get("DCGM Version"),
              "driver_version": meta.get("Driver Version Detected")}
    bad = False
    for test in tests:
        outcomes = dict(test.results)  # the last word per GPU
        failing = [(gpu, result) for gpu, result in outcomes.items() if result in ("fail", "warn")]
        if any(gpu is not None for gpu, _ in failing):  # "memory | Fail" above "GPU0: Fail": the GPU rows say which
            failing = [(gpu, result) for gpu, result in failing if gpu is not None]
        notes = [(kind, _join(pieces)) for kind, pieces in test.notes if kind != "info"]
        for gpu, outcome in failing:
            bad = True
            said = [text for _, text in notes if gpu is None or _gpu_of(text) in (None, gpu)]
            message = "; ".join(said) or None
            fields = {**common, "test": test.name, "section": test.section, "result": outcome, "gpu_index": gpu,
                      "message": message, **_reason_fields(reasons_in(message or ""))}
            yield _event(doc, test.first, fields, test.last)
    if not bad and any(test.results for test in tests):
        passed = sum(1 for test in tests if any(result == "pass" for _, result in test.results))
        yield _event(doc, block[0], {**common, "test": "diag", "result": "pass", "tests": passed}, block[-1])


def _gpu_of(text: str) -> int | None:
    m = _GPU_IN_TEXT.search(text)
    return int(m[1]) if m else None


# ---------------------------------------------------------------- dcgmi diag -j, and lines naming DCGM_FR_*

_JSON_ID = later.compile(r'"error_id"\s*:\s*(?P<id>\d+)')
_JSON_KEY = {key: later.compile(rf'"{key}"\s*:\s*"(?P<value>[^"]*)') for key in ("gpu_id", "status", "name", "warning")}


def _dcgm_json(doc: TextDoc, lines: list[Line], covered: set[int]) -> Iterator[Event]:
    for line in lines:
        if line.number in covered or not (m := _JSON_ID.search(line.text)):
            continue
        covered.add(line.number)
        before, after = doc.preceding(line, 40)[::-1], doc.following(line, 6)
        warning, warning_line = _nearest("warning", [line, *after, *before[:6]])
        status, status_line = _nearest("status", before)
        gpu, _ = _nearest("gpu_id", before)
        test, _ = _nearest("name", before)
        reason = failure_reasons().get(int(m["id"]))
        fields = {"tool": "dcgmi", "test": test, "result": _RESULTS.get(status or "", "fail"),
                  "gpu_index": int(gpu) if gpu and gpu.isdigit() else None, "message": warning,
                  **_reason_fields([reason] if reason else [])}
        if reason is None:
            fields["error_id"] = int(m["id"])
        first = status_line or line
        last = warning_line if warning_line is not None and warning_line.number > first.number else line
        yield _event(doc, first, fields, last)


def _nearest(key: str, candidates: list[Line]) -> tuple[str | None, Line | None]:
    """The value of a JSON string key in the first of `candidates` that holds it, and that line."""
    for candidate in candidates:
        if found := _JSON_KEY[key].search(candidate.text):
            return found["value"], candidate
    return None, None


_PCI = later.compile(r"\bPCI:(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])")
_UUID = later.compile(r"\b(?P<uuid>GPU-[0-9a-fA-F]{8}-[0-9a-fA-F-]{27})\b")
_GPU_FIELD = later.compile(r"\bGPU:\s?(?P<gpu>\d+)\b")


def _dcgm_reason_lines(doc: TextDoc, lines: list[Line], covered: set[int]) -> Iterator[Event]:
    """A line that names a DCGM_FR_* code outside a dcgmi table: a health monitor's verdict."""
    seen: dict[tuple, Event] = {}
    for line in lines:
        if line.number in covered or "DCGM_FR_" not in line.text:
            continue
        reasons = [r for m in _CODE.finditer(line.text) if (r := reason_named(m[0]))]
        if not reasons:
            continue
        gpu = _GPU_FIELD.search(line.text)
        pci, uuid = _PCI.search(line.text), _UUID.search(line.text)
        fields = {"tool": "dcgm", "result": "fail", "gpu_index": int(gpu["gpu"]) if gpu else None,
                  "pci": pci["pci"] if pci else None, "gpu_uuid": uuid["uuid"] if uuid else None,
                  "message": line.text.strip(), **_reason_fields(reasons)}
        key = (fields.get("error_code"), fields["gpu_index"], fields["pci"])
        seen[key] = (dataclasses.replace(seen[key], count=seen[key].count + 1) if key in seen
                     else _event(doc, line, fields))
    yield from seen.values()


# ---------------------------------------------------------------- gpu-burn

_BURN_GPU = later.compile(r"^\s*GPU (?P<gpu>\d+): (?P<name>.+?) \(UUID: (?P<uuid>GPU-[0-9a-fA-F-]+)\)")
_BURN_PROGRESS = later.compile(r"proc'd:(?P<procd>.*?)errors:(?P<errors>.*?)(?=temps:|power:|$)")
_BURN_COUNT = later.compile(r"(?P<n>-?\d+)\s*(?:\((?P<flag>WARNING|DIED)!\))?")
_BURN_TESTED = later.compile(r"\bTested (?P<n>\d+) GPUs:")
_BURN_RESULT = later.compile(r"^\s*GPU (?P<gpu>\d+): (?P<result>OK|FAULTY)\s*$")
_BURN_FAILURE = later.compile(r"(?P<what>Failure during compute|Couldn't init a GPU test): (?P<detail>.*?)\s*$")


@dataclass
class _Burn:
    names: dict[int, tuple[str, str]] = field(default_factory=dict)
    errors: dict[int, int] = field(default_factory=dict)
    died: set[int] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    progress: Line | None = None

    def gpu_fields(self, gpu: int) -> dict:
        name, uuid = self.names.get(gpu, (None, None))
        return {"gpu_index": gpu, "gpu_name": name, "gpu_uuid": uuid, "errors": self.errors.get(gpu),
                "died": True if gpu in self.died else None, "message": "; ".join(self.failures) or None}


def _gpu_burn(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    state = _Burn()
    for line in lines:
        text = line.text
        if m := _BURN_GPU.match(text):
            state.names[int(m["gpu"])] = (m["name"].strip(), m["uuid"])
        elif m := _BURN_FAILURE.search(text):
            if (said := f"{m['what']}: {m['detail']}".strip()) not in state.failures:
                state.failures.append(said)
        elif matches := list(_BURN_PROGRESS.finditer(text)):
            state.progress = line
            for gpu, count in enumerate(_BURN_COUNT.finditer(matches[-1]["errors"])):
                if count["flag"] == "DIED":
                    state.died.add(gpu)
                elif count["flag"] == "WARNING":
                    state.errors[gpu] = int(count["n"])
        elif m := _BURN_TESTED.search(text):
            yield from _burn_summary(doc, line, int(m["n"]), state)
            state = _Burn()
        elif "No clients are alive" in text:
            yield from _burn_unfinished(doc, state)
            state = _Burn(names=state.names)
    yield from _burn_unfinished(doc, state)


def _burn_summary(doc: TextDoc, tested: Line, count: int, state: _Burn) -> Iterator[Event]:
    results = [(line, m) for line in doc.following(tested, count + 2) if (m := _BURN_RESULT.match(line.text))]
    faulty = [(line, int(m["gpu"])) for line, m in results if m["result"] == "FAULTY"]
    for line, gpu in faulty:
        yield _event(doc, line, {"tool": "gpu-burn", "test": "burn", "result": "faulty", **state.gpu_fields(gpu)})
    if results and not faulty:
        fields = {"tool": "gpu-burn", "test": "burn", "result": "pass", "gpus": count,
                  "message": "; ".join(state.failures) or None}
        yield _event(doc, tested, fields, results[-1][0])


def _burn_unfinished(doc: TextDoc, state: _Burn) -> Iterator[Event]:
    """A run that stopped before its summary: GPUs whose test died, or that had counted errors."""
    if state.progress is None:
        return
    for gpu in sorted(state.died | state.errors.keys()):
        result = "fail" if gpu in state.died else "faulty"
        fields = {"tool": "gpu-burn", "test": "burn", "result": result, **state.gpu_fields(gpu)}
        yield _event(doc, state.progress, fields)


# ---------------------------------------------------------------- cuda_memtest

_MEMTEST_LINE = later.compile(r"^\[(?P<when>\d\d/\d\d/\d{4} \d\d:\d\d:\d\d)\]\[(?P<host>[^\]]*)\]\[(?P<gpu>\d+)\]:"
                              r"(?P<msg>.*?)\s*$")
_MEMTEST_DEVICE = later.compile(r"^Device name=(?P<name>.+?), global memory size=\d+, serial=(?P<serial>.+)$")
_MEMTEST_TEST = later.compile(r"^(?P<test>Test\d+ \[[^\]]+\])$")
_MEMTEST_FINISHED = later.compile(r"^Test\d+ finished in ")
_MEMTEST_ERRORS = later.compile(r"^ERROR: \((?P<kernel>\w+)\) (?P<n>\d+) errors found in block (?P<block>\d+)")
_MEMTEST_SERIAL = later.compile(r"^ERROR: The unit serial number is (?P<serial>.+)$")


def _cuda_memtest(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    names: dict[int, tuple[str | None, str | None]] = {}
    test: dict[int, str] = {}
    found: dict[tuple[int, str], dict] = {}
    attached: set[int] = set()
    start = end = host = None
    finished = 0
    for line in lines:
        if not (m := _MEMTEST_LINE.match(line.text)):
            continue
        gpu, msg = int(m["gpu"]), m["msg"]
        host = host or m["host"]
        if msg.startswith("Running cuda memtest"):
            start = start or line
        elif d := _MEMTEST_DEVICE.match(msg):
            serial = None if d["serial"].startswith("unknown") else d["serial"].strip()
            names[gpu] = (d["name"].strip(), serial)
        elif msg.startswith("Attached to device"):
            attached.add(gpu)
        elif t := _MEMTEST_TEST.match(msg):
            test[gpu] = t["test"]
        elif _MEMTEST_FINISHED.match(msg):
            finished, end = finished + 1, line
        elif e := _MEMTEST_ERRORS.match(msg):
            entry = found.setdefault((gpu, test.get(gpu, e["kernel"])), {"line": line, "errors": 0, "blocks": 0})
            entry["errors"] += int(e["n"])
            entry["blocks"] += 1
        elif s := _MEMTEST_SERIAL.match(msg):
            names[gpu] = (names.get(gpu, (None, None))[0], s["serial"].strip())
    for (gpu, name), entry in found.items():
        gpu_name, serial = names.get(gpu, (None, None))
        yield _event(doc, entry["line"], {"tool": "cuda_memtest", "test": name, "result": "fail", "gpu_index": gpu,
                                          "gpu_name": gpu_name, "gpu_serial": serial, "errors": entry["errors"],
                                          "blocks": entry["blocks"], "host": host})
    if not found and finished and start is not None:
        only_gpu = min(attached) if len(attached) == 1 else None
        gpu_name, serial = names.get(only_gpu, (None, None)) if only_gpu is not None else (None, None)
        yield _event(doc, start, {"tool": "cuda_memtest", "test": "memtest", "result": "pass", "tests": finished,
                                  "gpu_index": only_gpu, "gpu_name": gpu_name, "gpu_serial": serial, "host": host}, end)


# ---------------------------------------------------------------- memtestG80 / memtestCL

_G80_HEADER = later.compile(r"Running (?P<iters>\d+) iterations of tests over (?P<mb>\d+) MB of (?P<gpu_word>GPU )?"
                            r"memory on (?P<where>card|device) (?P<gpu>\d+): (?P<name>.+?)\s*$")
_G80_TEST = later.compile(r"^\s*(?P<test>[A-Z][^:]*?): (?P<n>\d+) errors \((?P<ms>\d+) ms\)\s*$")
_G80_FINAL = later.compile(r"Final error count.{0,200}?: (?P<n>\d+) errors")  # bounded: no rescan per copy
_G80_PROGRESS = later.compile(r"Test iteration (?P<iteration>\d+) \((?:GPU|card|device) (?P<gpu>\d+), "
                              r"(?P<mb>\d+) MiB\): (?P<n>\d+) errors so far")
"""memtestG80's running count, printed after each iteration (`Test iteration 50 (GPU 0, 128 MiB): 45528 errors so far`,
openmm/openmm#2026): a paste of these alone, without the run's header, still tells the card's memory."""
IMPLAUSIBLE = 2**32 - 2**16
"""Counts from here up are a 32-bit counter that went below zero (memtestG80 issue #3), not bad words."""


def _memtest_g80(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    runs: list[dict] = []
    banner = None
    progress: dict[int, tuple[Line, int, int]] = {}
    for line in lines:
        text = line.text
        if m := _G80_PROGRESS.search(text):
            progress[int(m["gpu"])] = (line, int(m["mb"]), int(m["n"]))
        elif "MemtestG80 v" in text or "MemtestCL v" in text:
            banner = "memtestCL" if "MemtestCL" in text else "memtestG80"
        elif m := _G80_HEADER.search(text):
            tool = banner or ("memtestG80" if m["where"] == "card" else "memtestCL")
            runs.append({"tool": tool, "line": line, "gpu": int(m["gpu"]), "name": m["name"], "mb": int(m["mb"]),
                         "tests": [], "bandwidth_failed": False})
        elif not runs:
            continue
        elif m := _G80_TEST.match(text):
            runs[-1]["tests"].append((line, m["test"], int(m["n"])))
        elif text.strip() == "Test failed!":
            runs[-1]["bandwidth_failed"] = True
        elif m := _G80_FINAL.search(text):
            runs[-1]["final"] = int(m["n"])
    for run in runs:
        if not run["tests"]:
            continue
        bad = [(line, test, n) for line, test, n in run["tests"] if n]
        implausible = any(n >= IMPLAUSIBLE for _, _, n in bad)
        fields = {"tool": run["tool"], "gpu_index": run["gpu"], "gpu_name": run["name"], "tested_mb": run["mb"],
                  "tests": len(run["tests"]), "bandwidth_test_failed": run["bandwidth_failed"] or None}
        if bad:
            errors = sum(n for _, _, n in bad if n < IMPLAUSIBLE)
            fields.update(test=bad[0][1] if len(bad) == 1 else "memtest", result="fail", errors=errors or None,
                          failed_tests=len(bad), implausible=implausible or None)
            yield _event(doc, bad[0][0], fields, bad[-1][0])
        else:
            fields.update(test="memtest", result="pass")
            yield _event(doc, run["line"], fields, run["tests"][-1][0])
    reported = {run["gpu"] for run in runs if run["tests"]}
    for gpu, (line, mb, n) in progress.items():
        if gpu not in reported:  # the running count is all the paste has of this card's run
            counted = n if n < IMPLAUSIBLE else None
            yield _event(doc, line, {"tool": banner or "memtestG80", "gpu_index": gpu, "tested_mb": mb,
                                     "test": "memtest", "result": "fail" if n else "pass", "errors": counted or None,
                                     "implausible": (n >= IMPLAUSIBLE) or None})


# ---------------------------------------------------------------- nccl-tests

_NCCL_BOUNDS = later.compile(r"Out of bounds values\s*:\s*(?P<n>\d+)\s+(?P<verdict>OK|FAILED)")
_NCCL_BUSBW = later.compile(r"Avg bus bandwidth\s*:\s*(?P<bw>-?[\d.]+(?:e[-+]?\d+)?|-?nan|inf)", regex.IGNORECASE)
_NCCL_BINARY = later.compile(r"\b(?P<test>[a-z][a-z_]*_perf)(?:_mpi)?\b")
_NCCL_FAILURE = later.compile(
    r"(?:(?P<host>[\w.\-]+): )?Test (?P<lib>NCCL|CUDA) failure (?P<src>\S+:\d+) '(?P<message>[^']*)'")
_NCCL_UNWIND = later.compile(r"Test failure (?P<file>[a-z_]+)\.cu:\d+")


def _nccl_tests(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    seen: dict[tuple, Event] = {}
    binary = None
    # the *_perf binary of the run being read: the last one named (its command line, "Collective test starting")
    for line in lines:
        if m := _NCCL_BOUNDS.search(line.text):
            after = doc.following(line, 1)
            bw = _NCCL_BUSBW.search(after[0].text) if after else None
            fields = {"tool": "nccl-tests", "test": binary, "result": "fail" if m["verdict"] == "FAILED" else "pass",
                      "errors": int(m["n"]), "avg_busbw": _float(bw["bw"]) if bw else None}
            yield _event(doc, line, fields, after[0] if bw else None)
            binary = None
        elif m := _NCCL_FAILURE.search(line.text):
            unwound = [u["file"] for nxt in doc.following(line, 8) if (u := _NCCL_UNWIND.search(nxt.text))]
            test = next((f"{name}_perf" for name in unwound if name != "common"), None)
            key = (m["lib"], m["src"], m["message"])
            if key in seen:
                seen[key] = dataclasses.replace(seen[key], count=seen[key].count + 1)
                continue
            seen[key] = _event(doc, line, {"tool": "nccl-tests", "test": test or binary, "result": "fail",
                                           "host": m["host"],
                                           "message": f"{m['lib']} failure {m['src']} '{m['message']}'"})
        elif m := _NCCL_BINARY.search(line.text):
            binary = m["test"]
    yield from seen.values()


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# ---------------------------------------------------------------- the source

def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """health-test events of every tool found among the candidate lines, in file order."""
    covered: set[int] = set()
    events = [*_dcgmi_tables(doc, lines, covered), *_dcgm_json(doc, lines, covered),
              *_dcgm_reason_lines(doc, lines, covered), *_gpu_burn(doc, lines), *_cuda_memtest(doc, lines),
              *_memtest_g80(doc, lines), *_nccl_tests(doc, lines)]
    events += [code for event in events for code in _named_codes(doc, event)]
    yield from sorted(events, key=lambda e: (e.where.line, e.where.end_line))


_NAMED_CODE = later.compile(r"\b(?P<word>S?XID)\s+(?P<code>\d{1,3})\b", regex.IGNORECASE)
"""The Xid or SXid a DCGM reason's message names: "Detected XID %u for GPU %u", "Uncontained error - XID 95",
"Detected fatal NvSwitch SXID %u" (DCGM_FR_XID_ERROR, DCGM_FR_UNCONTAINED_ERROR, DCGM_FR_SXID_ERROR)."""


def _named_codes(doc: TextDoc, event: Event) -> Iterator[Event]:
    """An xid (or sxid) event for each code a failed DCGM check's message names: the check read the driver's
    event, which the Xid tables say more about than DCGM's "XID error detected" does."""
    if event.fields.get("error_category") != "SOFTWARE_XID" or event.fields.get("result") not in ("fail", "warn"):
        return
    for hit in _NAMED_CODE.finditer(str(event.fields.get("message", ""))):
        switch = hit["word"].lower() == "sxid"
        if (code := code_fields(int(hit["code"]), switch)) is None:
            continue
        fields = {**code, "message": event.fields["message"], "tool": "dcgm",
                  **{k: event.fields[k] for k in ("gpu_index", "pci", "gpu_uuid") if event.fields.get(k) is not None}}
        yield dataclasses.replace(event, kind="sxid" if switch else "xid", fields=fields)
