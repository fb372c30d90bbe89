"""Known codes and phrases wherever they stand: the reader of last resort, built from the fact tables.

Each format reader knows one layout (kernel_log reads `NVRM: Xid (PCI:0000:3b:00): 79, ...`). People and
programs write the same facts in layouts no reader knows: `XID 79(GPU has fallen off the bus) detected on PCI`
as a health daemon logs it, `Xid 48 — uncorrectable` in a summary someone typed, `| Xid | 94 |` in a table, an
NVML message wrapped over two lines of a container runtime's error. This source runs after the format readers,
on the lines none of them turned into an event, and finds what the tables know:

- an Xid or SXid by number after its name, when the catalog (data/xid.tsv, data/sxid.tsv) knows the number;
- a CUDA error by its runtime or driver name, an NVML return by name, a CUDA library's status by name;
- a CUDA error's message (data/cuda-errors.tsv, those long enough to be no one's everyday words) and every
  phrase of data/cause-phrases.tsv, with any run of blanks, line breaks or table bars between its words: the line
  before and the line after the anchor's line are read with it, each without the tag (`NVRM:`) it repeats.

Each becomes the event its format reader would have made (an `xid` event with its number, a `cuda-error` with its
name, an `nvml-error`, a `library-error`), or a `cause-phrase` event for a table phrase (signatures/phrases.yaml),
with fields["read"] = LOOSE, so that a finding resting only on such events is trusted less
(signatures.finding_for). A hit it does not read -- a negation ("no Xid errors"), a success code, a number the
catalog does not know, the word without a code -- is an `Unread` line with its reason: the input's `unread` list,
which a test holds to "nothing known goes unread" over the whole corpus.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import regex

from .. import knowledge, later
from ..model import LOOSE, Event, Unread
from ..prefilter import ANY_CASE
from ..text import Line, TextDoc
from .frameworks.cuda_runtime import LIBRARY_STATUS, library_name

NAME = "mentions"
READS_UNCLAIMED = True
"""The pipeline hands this source the lines the format readers already turned into events (pipeline.read_blob)."""

CODE_WORDS = (b"Xid", b"XID", b"xid", b"SXid", b"SXID", b"sxid")
_CODE_TEXTS = tuple(word.decode() for word in CODE_WORDS)
NAME_WORDS = (b"cudaError", b"CUDA_ERROR_", b"Cuda(", b"CudaError", b"CudaException", b"NVML_ERROR_", b"_STATUS_",
              b"NVRTC_ERROR_", b"NV_ENC_ERR_",
              b"uda error", b"UDA error", b"UDA Error",
              b"uda driver error", b"UDA driver error", b"UDA Driver Error")

_CODE = later.compile(
    r"(?i)(?<![\w/.-])(?P<word>s?xid)s?\b(?:[ \t]++(?:errors?|error[ \t]++codes?|codes?|events?)\b)?"
    r"(?:\s*\(PCI:(?P<pci>[0-9a-f:.]{7,16})\))?"
    r"(?P<gap>[ \t]*+(?:[:=#|(\[-]|\u2014|\u2013)?[ \t]*+)(?P<code>\d{1,5})(?![\d.]?\d|\w)")
"""A code after its word: `Xid 149,` `XID 79(GPU has fallen off the bus)` `Xid=94` `| Xid | 48` `Xid: 13`
`Xid (PCI:0000:01:00): 79` `Xid 48 — uncorrectable`, and after the word's noun as a health check prints it (Slurm
NHC's `Found XID errors: 63`, mej/nhc#147; `Xid error 79`); not a version (`xid 1.2`) or a longer token."""
_NAMES = later.compile(r"\b(?P<cuda>cudaError[A-Za-z]+|CUDA_ERROR_[A-Z_]+)\b|\b(?P<nvml>NVML_ERROR_[A-Z_]+)\b"
                       r"|\bCuda(?:Error|Exception)?(?:::|\(|:[ \t]++'?)(?:Error)?"
                       r"(?P<camel>[A-Z][a-z]++(?:[A-Z][a-z0-9]*+)++)\b")
"""CUDA errors and NVML returns by name; library statuses by the framework reader's own pattern (LIBRARY_STATUS). A
driver error as Rust's CUDA bindings print their enum after the word Cuda (`Cuda(NoBinaryForGpu)`, snarkVM's error
around cust's CudaError; `CudaError::LaunchFailed`) and .NET's ManagedCuda its CUResult (`CudaException:
'ErrorIllegalAddress: ...'`, kunzmi/managedCuda#89)."""
_NUMBERED = later.compile(r"(?i)\bcuda(?:[ \t]++(?:driver|runtime))?[ \t]++error[ \t]*+(?:code[ \t]*+)?[:=#]?[ \t]*+"
                           r"\(?(?P<number>\d{1,4})(?![\d.])"
                           r"|\bcuda[ \t]++execution[ \t]++failed[ \t]++with[ \t]++error[ \t]*+"
                           r"(?P<number>\d{1,4})(?![\d.])")
"""A CUDA error by number after words that name it: `Cuda driver error 804 in call at file` (LAMMPS), `CUDA error
700`, `CUDA Error: 2` (the number is the same in the runtime and the driver API), and spconv's (tensorview's)
`cuda execution failed with error 2` (open-mmlab/mmdetection3d#80)."""
_API_NUMBERED = later.compile(
    r"\b(?:cuda[A-Z]\w{2,40}+|cu[A-Z][a-z]\w{1,40}+)\b[^\n]{0,100}?\b(?i:returned|error[ \t]++code|error|code|status"
    r"|failed[ \t]++with|res|ret|result)[ \t]*+[:=]?[ \t]*+\(?[ \t]*+(?P<number>\d{1,3})(?![\d.])")
"""A CUDA error by number after the API call that returned it: `cudaGetDeviceCount failed in ..., error code : 35`
(Paddle), `cudaGetDeviceCount returned 3` (deviceQuery), `cuInit failed with 999`, `cuLaunchKernel -> Returned: 701`
(TornadoVM), `cuMemoryAllocate failed res=2` (HAMi-core's wrapper of the driver API)."""
_CODE_NUMBERED = later.compile(r"(?i)\berror[-_ \t]?code[ \t]*+[:=]?[ \t]*+\(?[ \t]*+(?P<number>\d{1,3})(?![\d.])")
"""A number given as an error code, which is a CUDA error's only where the line also holds that error's own message
(RELION's `ERROR: out of memory in .../acc_backprojector_impl.h at line 37 (error-code 2)`, its HANDLE_ERROR macro
printing cudaGetErrorString and the code): the two agreeing are the evidence, either alone is not."""
_CALL_MESSAGE = later.compile(
    r"(?i)\bcuda[ \t]++(?:runtime|driver)[ \t]++error[ \t]++in[ \t]++[^\n]{1,200}?\):[ \t]*+"
    r"(?P<message>[a-z][a-z ,'-]{2,80})"
    r"|(?-i:\b(?:cuda[A-Z]\w{2,40}+|cu[A-Z][a-z]\w{1,40}+))[ \t]++failed[ \t]*+:[ \t]*+"
    r"(?P<message>[a-z][a-z ,'-]{2,80})")
"""A CUDA error told by the call that returned it and the error's message, short ones included, as TensorRT-LLM's
TLLM_CUDA_CHECK prints it: `CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory
(/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)`, and as PyCUDA's errors do: `MemoryError: cuMemAlloc
failed: out of memory` (cryoem-uoft/cryosparc-issues#142), `cuInit failed: unknown error` (ratt-ru/PyMORESANE#22);
read over the window, since a terminal may cut the call in two."""
CODE_WORDS_NUMBERED = (b"error-code", b"rror code", b"RROR CODE", b"error_code", b"(?i)cuda execution failed")
CALL_WORDS = (b"runtime error in", b"driver error in")
"""The words before a call whose error message follows (_CALL_MESSAGE)."""
_API_RESULT = later.compile(
    r"(?P<call>\bvk[A-Z]\w{2,60}+|\bcl[A-Z]\w{2,60}+|\bcl\]|(?i:\bopencl\b))[^\n]{0,80}?"
    r"(?i:failed|returned|error|err|result|status)[^\d\n-]{0,12}?(?P<number>-\d{1,10}+)(?!\d)"
    r"|(?P<call>\boptix[A-Z]\w{2,60}+)[^\n]{0,80}?(?i:failed|returned|error|result|code)[^\d\n-]{0,20}?"
    r"(?P<number>7\d{3})(?!\d)")
"""A Vulkan, OpenCL or OptiX result by number after the call (or the OpenCL module) that returned it: ncnn's
`vkQueueSubmit failed -4` (Tencent/ncnn#5150), `vkEnumeratePhysicalDevices failed -3` (k4yt3x/video2x#1019), darktable's
`[local laplacian cl] failed: -4` (darktable-org/darktable#3374), NVISII's `Optix call (optixInit()) failed with code
7801 (line 150)` (owl-project/NVISII#40); read as the result's name (data/api-results.tsv)."""
RESULT_WORDS = (b"failed -", b"failed: -", b"returned -", b"error -", b"error: -", b"err = -", b"err=-", b"error (-",
                b"ERROR (-", b"Error (-", b"optix")
"""What stands before a result number (_API_RESULT)."""
API_WORDS = (b"cudaGet", b"cudaSet", b"cudaMalloc", b"cudaMemcpy", b"cudaDevice", b"cudaStream", b"cudaEvent",
             b"cudaLaunch", b"cudaFree", b"cuInit", b"cuCtx", b"cuMem", b"cuModule", b"cuLaunch", b"cuDevice")
"""The CUDA runtime's and driver's API families whose calls a program names when one fails."""
_SIGNALS = later.compile(r"(?i)(?<![A-Za-z0-9_-])(?P<what>segmentation[ \t]++fault|seg[ \t]?faul?t(?:ed|s)?"
                          r"|(?<!\ban[ \t])illegal[ \t]++instruction|floating[ -]point[ \t]++exception"
                          r"|access[ \t]++violation|segmentation[ \t]++violation"
                          r"|(?<!pci[ \t])(?<!pcie[ \t])(?<!pci-e[ \t])(?<!aer:[ \t])bus[ \t]++error"
                          r"|(?-i:(?<![\w-])SEGV(?=[^\w-]|$)))"
                          r"(?![A-Za-z0-9_])"
                          r"|(?-i:(?<=[a-z,][ \t]|[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}])Killed)(?![A-Za-z0-9_-])"
                          r"|(?<=[\"'`\u2018\u201c])(?P<quoted>killed)(?=[\"'`\u2019\u201d])")
"""A crash signal told in words (`the socket closed by segmentation fault core dumped error`, `python segfaults at
import`, `I simply get a Killed message`: the shell's word, capitalised inside a sentence or quoted, or inside a
sentence of Chinese, Japanese or Korean, which sets no blank around it (`...时运行进程会被直接Killed掉`,
lamda-bbo/Efficient-TDP#1), as none around any of these words there (`直接弹出Segmentation fault (core dumped)`,
facebookresearch/SlowFast#676); Windows' `access violation`; `I meet Bus error: nonexistent physical address with signal
7`, a bus error told, which PCIe's `PCIe Bus Error` is not; a crash handler's frame marked `(SEGV)`, SteamVR's
`libnvidia-glcore.so.595.45.04 + 0xda806f (SEGV)`, alvr-org/ALVR#3230, and AddressSanitizer's `SEGV on unknown
address`): the end a shell or faulthandler would have reported; CUDA's "an illegal instruction was encountered" is
the CUDA error, read by its message."""
SIGNAL_WORDS = (b"egmentation fault", b"EGMENTATION FAULT", b"egfault", b"EGFAULT", b"eg fault", b"llegal instruction",
                b"LLEGAL INSTRUCTION", b"egmentation violation", b"point exception", b"POINT EXCEPTION",
                b"Killed", b"killed", b"SEGV",
                b"ccess violation", b"CCESS VIOLATION", b"us error", b"US ERROR")
_SIGNAL_STEMS = tuple(sorted({word.decode().lower() for word in SIGNAL_WORDS}))
"""SIGNAL_WORDS in lower case: _SIGNALS's alternatives all start at a lookbehind, which the regex module tries at every
position of a line (12 ms on a line of 8,000 blanks), so it searches only a line that holds one of its anchors."""
_HEALTHY = later.compile(r"(?:Success|SUCCESS)$")
_REPEATED_TAG = later.compile(r"^\s*(?:\[[^\]]{1,40}\]\s*)?(?P<tag>[\w.-]{2,30}:)\s")
"""A line's leading tag (`NVRM:`, `nvidia-container-cli:`), which a program repeats on each line it wraps."""
_BLANKS = later.compile(r"[\s|]+")
_PLACEHOLDERS = {
    "{ver}": r"\d++(?:\.\d++)++", "{num}": r"\d++", "{pci}": r"(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]",
    "{name}": r"\S{1,64}+", "{sep}": r"[:|=]*+", "{dir}": r"[/\\]", "{...}": r".{0,400}?", "{..}": r".{0,80}?",
}
"""Possessive where a run can never give back (a word, a number): a line of many near-misses stays linear. A name is
bounded too: unbounded, a line of one word repeated without blanks is rescanned from each copy."""

# Reasons an anchored line is seen but not read (JSON `unread`).
NEGATED = "the text says it did not happen"
ON_PURPOSE = "a kill the text says a person or a scheduler sent"
HEALTHY = "a success code, not an error"
UNKNOWN_CODE = "a number the code tables do not know"
NO_CODE = "the word stands without a code after it"
UNKNOWN_NAME = "a name the code tables do not know"
DOCUMENTED = "documentation: a template with placeholders, not what happened"
NOT_ABOUT_GPU = "the phrase stands without the word that makes it about the GPU"


PHRASES = "cause-phrases.tsv"


@dataclass(frozen=True)
class Phrase:
    """One row of data/cause-phrases.tsv, compiled."""

    text: str
    anchor: str
    pattern: regex.Pattern
    key: str
    """The anchor as `gate` writes text: a window whose gate lacks it cannot hold the phrase, and the pattern is
    neither compiled nor run on it."""
    cause: str
    needs: str | None
    proves: str
    action: str

    def needed_in(self, text: str) -> bool:
        """Whether `text` holds a word of `needs` (alternatives split by `|`), where the phrase alone is everyday words
        that speak of the GPU stack only beside one of them."""
        return self.needs is None or any(word in text.lower() for word in self.needs.lower().split("|"))

    def fields(self, hit: regex.Match) -> dict[str, Any]:
        """The event fields of a hit: the words read, and what the table says they prove and ask."""
        return {"phrase": hit.group(0), "cause": self.cause, "proves": self.proves, "action": self.action}


@cache
def phrases() -> tuple[Phrase, ...]:
    return tuple(Phrase(row["phrase"], row["anchor"], _compiled(row["phrase"]), gate(row["anchor"]), row["cause"],
                        knowledge.dash(row["needs"]), row["proves"], row["action"])
                 for row in knowledge.data_rows(PHRASES))


@cache
def _api_results() -> dict[tuple[str, int], str]:
    return {(row["api"], int(row["number"])): row["name"] for row in knowledge.data_rows("api-results.tsv")}


def api_result(call: str, number: int) -> tuple[str, Phrase] | None:
    """The name of a Vulkan, OpenCL or OptiX result a call returned, and the phrase row that says what it proves; None
    where the number is no result of that API or its name proves no cause."""
    api = "vulkan" if call.startswith("vk") else "optix" if call.startswith("optix") else "opencl"
    name = _api_results().get((api, number))
    phrase = _phrase_naming(name) if name else None
    return (name, phrase) if name and phrase else None


@cache
def _phrase_naming(name: str) -> Phrase | None:
    """The phrase row a result's name matches (each name looked up once: a storm of one result repeats it)."""
    return next((p for p in phrases() if p.pattern.search(name)), None)


_UNGATED = later.compile(r"\s++|" + knowledge.APOSTROPHE)


def gate(text: str) -> str:
    """Text in lower case without blanks or apostrophes: a phrase's pattern allows any blanks between its words, any
    apostrophe and any letter case, so its anchor written so is in a window written so wherever the phrase is."""
    return _UNGATED.sub("", text.lower())


def _compiled(phrase: str) -> regex.Pattern:
    """A phrase's words and placeholders with any blanks between them (the window's blanks are single spaces)."""
    tokens = [t for t in regex.split(r"(\{[a-z.]+\})|\s+", phrase) if t]
    return later.compile(r"\s*+".join(_PLACEHOLDERS.get(t) or knowledge.typed(t) for t in tokens), regex.IGNORECASE)


def _anchor_words() -> tuple[bytes, ...]:
    """Each phrase's anchor and the longest word of each CUDA message read in free text, found in any letter case
    (the phrases and messages match so)."""
    words = {row["anchor"] for row in knowledge.data_rows(PHRASES)} | {
        pair for m in _messages() for pair in _message_anchors(m)}
    return tuple(sorted({ANY_CASE + w.lower().encode() for w in words}))


def _message_anchors(message: str) -> set[str]:
    """The longest pair of adjacent words in each half of a message: a pair is rare in logs where one word is not
    ("illegal memory", not "memory"), and a message wrapped anywhere keeps one of them whole on a line."""
    words = message.split()
    pairs = [f"{a} {b}" for a, b in itertools.pairwise(words)] or words
    half = max(1, len(pairs) // 2)
    return {max(part, key=len) for part in (pairs[:half], pairs[half:]) if part}


@cache
def _messages() -> tuple[str, ...]:
    """CUDA error messages that name a cause and are long enough to be read in free text (knowledge.MESSAGE_MIN)."""
    return tuple(sorted({r.message for r in knowledge.cuda_errors() if r.message and r.cause
                         and len(r.message) >= knowledge.MESSAGE_MIN}))


ANCHORS = (*CODE_WORDS, *NAME_WORDS, *API_WORDS, *CODE_WORDS_NUMBERED, *CALL_WORDS, *SIGNAL_WORDS, *RESULT_WORDS,
           *_anchor_words())
REPEATS = ANCHORS
"""A storm of identical lines folds as it is read for this source too: a repeat of a line holds the same mention,
and a format reader that folds its storms (kernel_log) keeps folding where it shares an anchor with this one."""


_NUMBERED_TOKEN = later.compile(r"(?<![\w:.])[\w:.]*?\d[\w:.]*+")
"""A token (a run of word characters, colons and dots) that holds a digit: what differs between repeats of one report
(times, pids, bus ids, counters), and a format reader folds such lines into the event of the first (kernel_log's
storms, a device plugin's repeated health line)."""


def shape(text: str) -> str:
    return " ".join(_NUMBERED_TOKEN.sub("#", text).split())


def parse(doc: TextDoc, lines: list[Line], earlier: Sequence[Event] = (),
          unread: list[Unread] | None = None) -> Iterator[Event]:
    """Events for the known codes and phrases on `lines` that the format readers' events (`earlier`) did not read
    (their lines, and repeats of their lines they folded); what is seen but not read goes to `unread`. On a line
    read only into a CUDA error that explains nothing (causeless), and on a line of prose, the phrases are still
    read, its codes not (its own event holds them); a traceback's exception line is read whole, since its event holds
    no code (`MemoryError: cuMemAlloc failed: out of memory`). Codes in documentation are not a report (_listed)."""
    events = list(_read(doc, lines, earlier, unread))
    listed = _listed(events)
    if unread is not None:
        unread.extend(Unread(e.where.line or 0, e.text[:300], DOCUMENTED) for e in listed)
    yield from (e for e in events if e not in listed)


_TEMPLATE = later.compile(r"<[a-z][a-z_ -]{0,20}>")
"""A placeholder of documentation (`XID 48 An uncorrectable double bit error (DBE) has been detected on GPU (<id>)`):
a text that shows how a code's message looks is documentation, and so are the other codes it lists."""


def _listed(events: list[Event]) -> list[Event]:
    """The loose Xid and SXid events of documentation: all of an input's, where one stands in a template. (A list
    of several codes alone is no sign: a person sums up a failing GPU's chain the same way, `Xid 48 / 171`,
    `Xid 63`, `Xid 94` + `Xid 154`.)"""
    codes = [e for e in events if e.kind in ("xid", "sxid")]
    return codes if any(_TEMPLATE.search(e.text) for e in codes) else []


def _read(doc: TextDoc, lines: list[Line], earlier: Sequence[Event],
          unread: list[Unread] | None) -> Iterator[Event]:
    mine = [e for e in earlier if e.where.path == doc.path and e.where.line is not None]
    read = lines_read([e for e in mine if not causeless(e)])
    weakly = lines_read([e for e in mine if causeless(e) and e.kind not in CAUSELESS_KINDS])
    seen: set[tuple[int, str]] = set()
    for line in lines:
        form = shape(line.text)
        taken = line.number in read.numbers or form in read.shapes
        if taken and not _prose(line.text):
            continue
        weak = taken or line.number in weakly.numbers or form in weakly.shapes
        found, reasons = ([], []) if weak else _codes(doc, line)
        for event in found:
            if (line.number, _key(event)) not in seen:
                seen.add((line.number, _key(event)))
                yield event
        if not found:
            window = _Window.around(doc, line)
            for first, last, kind, fields in window.hits(phrases_only=weak):
                claimed = all(n in read.numbers for n in range(first.number, last.number + 1))
                if claimed and not (_prose(first.text) or _prose(last.text)):
                    continue
                key = (first.number, f"{kind}:{fields.get('error') or fields.get('phrase')}")
                if key not in seen:
                    seen.add(key)
                    found.append(doc.event(kind, first, fields, last=last if last is not first else None))
                    yield found[-1]
            reasons += window.refused
            if not found and not weak and (record := _cut_message(line.text)) is not None:
                found.append(doc.event(knowledge.cuda_error_kind(record.cause), line, {
                    **knowledge.cuda_error_fields(record), "read": LOOSE}))
                yield found[-1]
        if not found and unread is not None:
            reason = reasons[0] if reasons else None
            if reason is not None:
                unread.append(Unread(line.number, line.original[:300], reason))


@dataclass(frozen=True)
class ReadLines:
    """The lines some events read: their numbers, and the shapes of their text (a folded repeat is read too)."""

    numbers: frozenset[int]
    shapes: frozenset[str]

    def hold(self, line: Line) -> bool:
        return line.number in self.numbers or shape(line.text) in self.shapes


def lines_read(events: list[Event]) -> ReadLines:
    numbers = (n for e in events for n in range(e.where.line or 0, (e.where.end_line or e.where.line or 0) + 1))
    return ReadLines(frozenset(numbers), frozenset(shape(text) for e in events for text in e.text.splitlines()))


PROSE_WORDS = 25
"""Words from which a line is a paragraph someone wrote: it tells several facts, and a format reader that read one
of them (nvidia-smi's `No devices were found`) leaves the others (`only supported by the open kernel modules`)."""


def _prose(text: str) -> bool:
    return len(text.split()) >= PROSE_WORDS


CAUSELESS_KINDS = frozenset({"python-exception", "reported-symptom", "cuda-device", "software-stack"})
"""Events that hold an error's words without naming a cause, name one on a person's word only, or only state the
machine: a traceback's exception (`OSError: [WinError 1455] ...` is the traceback reader's, and the words are the
cause), a reporter's sentence (a program's message pasted into it is still the program's), a GPU model or versions
read from a line that also tells what happened ("On an 8x H100 node, a card ... (Xid 119 timeout -> Xid 154 GPU Reset
Required)", gpustack/runtime#26)."""
ABORT_KINDS = frozenset({"fatal-signal", "child-failed"})
"""An abort's report holds the reason it stopped (`terminate called after throwing an instance of
'vk::DeviceLostError'` and the exception's `what():` under it): the abort names no cause of its own."""


def causeless(event: Event) -> bool:
    """A CUDA error the tables give no cause (`invalid argument`), a traceback's exception, or a reporter's words: its
    reader read the line, yet what it read explains nothing or is the weakest reading of it, so a phrase on the same
    line (the FlashAttention-3 source path the error names, Windows' paging-file error, a kernel's own "only supports
    sm120" pasted into an issue's prose) is still read."""
    if event.kind in CAUSELESS_KINDS or (event.kind in ABORT_KINDS and event.fields.get("signal") == "SIGABRT"):
        return True
    record = knowledge.cuda_error(event.fields.get("error") or "") if event.kind == "cuda-error" else None
    return record is not None and record.cause is None


def _key(event: Event) -> str:
    return f"{event.kind}:{event.fields.get('xid') or event.fields.get('sxid') or event.fields.get('error')}"


def _codes(doc: TextDoc, line: Line) -> tuple[list[Event], list[str]]:
    """Xid and SXid numbers and error names on one line; reasons for what it will not read."""
    text = line.text
    events: list[Event] = []
    reasons: list[str] = []
    if any(word in text for word in _CODE_TEXTS):
        hits = list(_CODE.finditer(text))
        for hit in hits:
            event = _code_event(doc, line, hit, reasons)
            if event is not None:
                events.append(event)
        if not hits and regex.search(r"(?i)(?<![\w/.-])s?xids?\b", text):
            reasons.append(NO_CODE)
    for hit in (*_NAMES.finditer(text), *LIBRARY_STATUS.finditer(text)):
        event = _name_event(doc, line, hit, reasons)
        if event is not None:
            events.append(event)
    if not events and (numbered := _NUMBERED.search(text) or _API_NUMBERED.search(text) or _own_message(text)):
        record = knowledge.cuda_error(numbered["number"])
        if record is None or record.number == 0:
            reasons.append(HEALTHY if record is not None else UNKNOWN_CODE)
        else:
            events.append(doc.event(knowledge.cuda_error_kind(record.cause), line, {
                **knowledge.cuda_error_fields(record), "number": record.number, "read": LOOSE}))
    if not events and _holds_signal_word(text) and (crash := _SIGNALS.search(text)):
        if knowledge.NEGATION.search(text, 0, crash.start()):
            reasons.append(NEGATED)
        elif crash["what"] is None and knowledge.KILLED_ON_PURPOSE.search(text):
            reasons.append(ON_PURPOSE)
        else:
            words = " ".join((crash["what"] or "killed").lower().split())
            events.append(doc.event("child-failed", line, {
                "signal": knowledge.signal_name(words) or "SIGSEGV", "reporter": "told", "read": LOOSE}))
    return events, reasons


def _holds_signal_word(text: str) -> bool:
    lowered = text.lower()
    return any(stem in lowered for stem in _SIGNAL_STEMS)


def _own_message(text: str) -> regex.Match | None:
    """An error code that is the CUDA error whose message the line also holds (_CODE_NUMBERED)."""
    lowered = text.lower()
    for hit in _CODE_NUMBERED.finditer(text):
        record = knowledge.cuda_error(hit["number"])
        if record is not None and record.message and record.message.lower() in lowered:
            return hit
    return None


CUT_WORDS = 16
"""Most words read back from a line's end for a CUDA message cut short (an issue title cut at GitHub's limit:
`...flash_fwd_launch_template.h:188): no kernel image is availa`, a terminal column): knowledge.message_starting
decides, from its MESSAGE_START_WORDS on."""


def _cut_message(text: str) -> knowledge.CudaError | None:
    """The CUDA message a line ends inside of: the fewest last words that start one message only."""
    words = text.split()
    for count in range(knowledge.MESSAGE_START_WORDS, min(len(words), CUT_WORDS) + 1):
        if (record := knowledge.message_starting(" ".join(words[-count:]))) is not None:
            return record
    return None


def _code_event(doc: TextDoc, line: Line, hit: regex.Match, reasons: list[str]) -> Event | None:
    if knowledge.NEGATION.search(line.text, 0, hit.start()):
        reasons.append(NEGATED)
        return None
    switch = hit["word"].lower() == "sxid"
    code = knowledge.code_fields(int(hit["code"]), switch)
    if code is None:
        reasons.append(UNKNOWN_CODE)
        return None
    fields: dict[str, Any] = {"message": line.text[hit.end():].strip(" ,:;)(-")[:200], "read": LOOSE, **code}
    if hit["pci"]:
        fields["pci"] = hit["pci"].lower()
    return doc.event("sxid" if switch else "xid", line, fields)


def _name_event(doc: TextDoc, line: Line, hit: regex.Match, reasons: list[str]) -> Event | None:
    name = hit.group(0)
    if _HEALTHY.search(name):
        reasons.append(HEALTHY)
        return None
    groups = hit.groupdict()
    record = (knowledge.cuda_error_variant(groups["camel"]) if groups.get("camel")
              else knowledge.cuda_error(name) or knowledge.cuda_error_misspelt(name) if groups.get("cuda") else None)
    if record is not None:
        return doc.event(knowledge.cuda_error_kind(record.cause), line, {**knowledge.cuda_error_fields(record),
                                                                    "read": LOOSE})
    if groups.get("nvml") and (code := knowledge.nvml_return(name)):
        return doc.event("nvml-error", line, {**knowledge.nvml_error_fields(code, "mentioned"), "read": LOOSE})
    if groups.get("status") and (status := knowledge.library_status(library_name(hit["lib"]), name)):
        return doc.event("library-error", line, {
            "library": status.library, "status": status.name, "status_cause": status.cause,
            "status_message": status.message, "read": LOOSE})
    reasons.append(UNKNOWN_NAME)
    return None


@dataclass
class _Window:
    """The anchor's line with the line before and after, blanks made single, repeated tags taken off: where a
    phrase wrapped, quoted or set in a table is read whole."""

    lines: list[Line]
    text: str
    starts: list[int]
    refused: list[str]

    @classmethod
    def around(cls, doc: TextDoc, line: Line) -> _Window:
        lines = [*doc.preceding(line, 1), line, *doc.following(line, 1)]
        tag = _REPEATED_TAG.match(line.text)
        pieces, starts, at = [], [], 0
        for each in lines:
            text = each.text
            if tag and each is not line and (own := _REPEATED_TAG.match(text)) and own["tag"] == tag["tag"]:
                text = text[own.end():]
            piece = _BLANKS.sub(" ", text).strip()
            starts.append(at)
            pieces.append(piece)
            at += len(piece) + 1
        return cls(lines, " ".join(pieces), starts, [])

    def _line_at(self, offset: int) -> Line:
        return self.lines[bisect.bisect_right(self.starts, offset) - 1]

    def hits(self, phrases_only: bool = False) -> Iterator[tuple[Line, Line, str, dict[str, Any]]]:
        key = gate(self.text)
        for phrase in phrases():
            if phrase.key not in key:
                continue
            for hit in phrase.pattern.finditer(self.text):
                if not phrase.needed_in(self.text):
                    self.refused.append(NOT_ABOUT_GPU)
                    continue
                if knowledge.NEGATION.search(self.text, max(0, hit.start() - 30), hit.start()):
                    self.refused.append(NEGATED)
                    continue
                yield self._line_at(hit.start()), self._line_at(hit.end() - 1), "cause-phrase", {
                    **phrase.fields(hit), "read": LOOSE}
        if phrases_only:
            return
        for hit in knowledge.cuda_message_pattern().finditer(self.text):
            record = knowledge.cuda_error(hit.group(0))
            if record is None or record.message not in _messages():
                continue
            yield self._line_at(hit.start()), self._line_at(hit.end() - 1), knowledge.cuda_error_kind(record.cause), {
                **knowledge.cuda_error_fields(record), "read": LOOSE}
        for hit in _API_RESULT.finditer(self.text):
            if (found := api_result(hit["call"], int(hit["number"]))) is not None:
                name, phrase = found
                yield self._line_at(hit.start()), self._line_at(hit.end() - 1), "cause-phrase", {
                    **phrase.fields(hit), "result": name, "proves": f"{name}: {phrase.proves}", "read": LOOSE}
        for hit in _CALL_MESSAGE.finditer(self.text):
            record = knowledge.cuda_error(hit["message"].strip())
            if record is not None and record.number:
                yield self._line_at(hit.start()), self._line_at(hit.end() - 1), \
                    knowledge.cuda_error_kind(record.cause), {**knowledge.cuda_error_fields(record), "read": LOOSE}
