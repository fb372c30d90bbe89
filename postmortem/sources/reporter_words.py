"""What a person writes in a bug report, read as evidence: the facts they type and the symptoms they describe.

It reads prose only -- the text of an issue, outside its fenced blocks and log runs (postmortem/triage) --
never a log, where "the system restarts the worker" is a program's business, not a symptom:

- the answers of an issue form (`### GPU` then `RTX 5090`) and a template's `key: value` lines
  (`- **Driver version**: 570.86`, a table row once unwrapped) become the facts the analysis already uses
  (data/issue-fields.tsv): a `software-stack` event for the versions, a `cuda-device` event per GPU model;
- a GPU model named in a sentence ("I have a gtx 950M", "on RTX 5090") is a `cuda-device` event too, when
  postmortem knows the model (knowledge.gpu_arch);
- a CUDA error's message quoted in another letter case than the runtime prints it (a title: "[CUDA ERROR]: Too
  many resources requested for launch"), which the framework source's exact anchors miss, is a `cuda-error`
  event like the one a log line gives;
- a symptom in the reporter's words ("my PC turns off under load", "the GPU falls off the bus", "I get a
  segmentation fault") is a `reported-symptom` event (data/reported-symptoms.tsv), the first sentence that says
  it: weak evidence that signatures/reported.yaml turns into a low-confidence finding, below any program's own
  report of the same thing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import regex

from .. import later
from ..knowledge import CONDITIONAL, NEGATION, data_rows, gpu_arch, quoted_cuda_message
from ..model import Event
from ..text import Line, TextDoc, fence_sides

NAME = "reporter-words"
READS = ("prose",)
ANCHORS = (b" ", b":", b"#", b"\xef\xbc\x9a", "，".encode(), "。".encode(), b"```", b"~~~",
           *(word.encode() for word in ("卡住", "卡死", "卡在", "卡着", "不动")))
"""Every line of prose with a word break, a key or a heading (`：` is the full-width colon), a sentence of Chinese
(which breaks no words: its comma or full stop), a Chinese title with neither, by the hang words it is read for
("deepspeed多机训练卡住不动了", hiyouga/LlamaFactory#2889), and the fences of code blocks: prose is small, and no log
is ever read by this source."""

REPORTED = "reported-"
"""How the id of every signature on a reported symptom begins (signatures/reported.yaml; a test checks it)."""
MAX_ANSWER_LINES = 12
"""Lines read under an issue form's heading for its answer."""
MAX_SENTENCE = 300
"""Characters of a sentence kept as a symptom's text."""

_KEY_VALUE = later.compile(r"^\s*(?:[-*+]\s+|\d+\.\s+)?(?:\*\*|__)?(?P<key>[^\W\d][^:：=*_|]{0,50}?)(?:\*\*|__)?"
                           r"\s*(?:[:：=]|\*\*\s*[:：])\s*(?:\*\*|__)?\s*(?P<value>\S.*)$")
_HEADING = later.compile(r"^\s{0,3}#{2,6}\s+(?P<key>.+?)\s*#*\s*$")
_EMPHASIS = later.compile(r"[*_`]+")
_GPU_LIST = later.compile(r"\bGPU\s++\d++:|[,;\n+]|\band\b")
"""What separates the GPUs of one answer ("GPU 0: ... GPU 1: ...", "2x RTX 4090, A100 and H100")."""
_SENTENCE_END = later.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n")
_GPU_MENTION = later.compile(
    r"(?i)\b(?:nvidia\s+)?(?:geforce\s+)?(?:(?:rtx|gtx|gt|mx|quadro|titan)\s*[a-z]?\d{2,4}[a-z]{0,2}"
    r"(?:\s+(?:ti|super|ada|pro|max-q|mobile|laptop)){0,2}|(?:tesla\s+)?(?:[ahblvptk]\d{1,3}[a-z]?|gb\d{3}|gh\d{3})"
    r"(?:[- ](?:sxm\d?|pcie|nvl|\d+gb))*)\b")


@dataclass(frozen=True)
class _Field:
    name: str
    label: regex.Pattern
    value: regex.Pattern
    check: str


@dataclass(frozen=True)
class _Symptom:
    id: str
    pattern: regex.Pattern


@cache
def _fields() -> tuple[_Field, ...]:
    return tuple(_Field(row["field"], later.compile(row["label"], regex.I), later.compile(row["value"]),
                        row["check"] or "") for row in data_rows("issue-fields.tsv"))


@cache
def _symptoms() -> tuple[_Symptom, ...]:
    return tuple(_Symptom(row["id"], later.compile(row["pattern"], regex.I))
                 for row in data_rows("reported-symptoms.tsv"))


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """The facts typed (one software-stack event, a cuda-device event per GPU model), then each symptom once."""
    _, lines = fence_sides(lines)  # an issue's text is cut at its fences before it gets here; a Markdown file is not
    versions: dict[str, tuple[Line, str]] = {}
    gpus: dict[str, Line] = {}
    for line in lines:
        for name, value in _answers(doc, line):
            if name == "gpu_name":
                gpus.setdefault(value, line)
            else:
                versions.setdefault(name, (line, value))
        for name, value in _mentioned_versions(line.text):
            versions.setdefault(name, (line, value))
        for mention in _GPU_MENTION.finditer(line.text):
            name = " ".join(mention.group().split())
            if gpu_arch(name) is not None and not any(name.lower() in known.lower() for known in gpus):
                gpus.setdefault(name, line)
    if versions:
        yield _stack(doc, versions)
    for name, line in gpus.items():
        yield doc.event("cuda-device", line, {"gpu_name": name}, text=line.original)
    said: set[str] = set()
    for line in lines:
        record = quoted_cuda_message(line.text)
        if record is not None and record.message and record.message not in line.text and record.name not in said:
            said.add(record.name)
            yield doc.event("cuda-error", line, {"error": record.name, "message": record.message, "quoted": True})
    for line in lines:
        for symptom in _symptoms():
            if symptom.id in said:
                continue
            sentence = _sentence(line.text, symptom.pattern)
            if sentence is not None:
                said.add(symptom.id)
                yield doc.event("reported-symptom", line, {"symptom": symptom.id}, text=sentence)


def _answers(doc: TextDoc, line: Line) -> Iterator[tuple[str, str]]:
    """(field, value) for a `key: value` line, or for an issue form's heading and the answer under it."""
    if (heading := _HEADING.match(line.text)) is not None:
        answer = []
        for below in doc.following(line, MAX_ANSWER_LINES):
            if _HEADING.match(below.text):
                break
            answer.append(below.text)
        yield from _read(heading["key"], "\n".join(answer))
    elif (pair := _KEY_VALUE.match(line.text)) is not None:
        yield from _read(pair["key"], pair["value"])


def _read(key: str, answer: str) -> Iterator[tuple[str, str]]:
    key = " ".join(_EMPHASIS.sub("", key).split()).rstrip(" :：")
    for field in _fields():
        if not field.label.fullmatch(key):
            continue
        for value in _values(field, answer):
            yield field.name, value
        return


def _values(field: _Field, answer: str) -> Iterator[str]:
    """The field's values in an answer: every GPU model named (a node of several), else the first version."""
    if field.check == "gpu-model":
        for part in _GPU_LIST.split(answer):
            name = " ".join(regex.sub(r"\(UUID:[^)]{0,64}\)", "", _EMPHASIS.sub("", part)).split())
            if name and gpu_arch(name) is not None:
                yield name
        return
    match = field.value.search(_EMPHASIS.sub("", answer))
    if match is not None:
        yield match["v"]


def _mentioned_versions(text: str) -> Iterator[tuple[str, str]]:
    """Versions named in a sentence: a field's label, then its value ("cuda 12.3, Nvidia driver 545.23.08")."""
    for field in _fields():
        if field.check:
            continue
        found = _inline(field).search(text)
        if found is not None:
            yield field.name, found["v"]


@cache
def _inline(field: _Field) -> regex.Pattern:
    """The field's label followed by its value, anywhere in a line."""
    label, value = field.label.pattern, field.value.pattern
    return regex.compile(rf"(?i)(?<![\w.-])(?:{label})[\s:=：-]*(?:is\s+|v(?=\d))?(?:{value})")


def _stack(doc: TextDoc, versions: dict[str, tuple[Line, str]]) -> Event:
    fields: dict[str, Any] = {name: value for name, (_, value) in versions.items()}
    if "torch_version" in fields:
        fields["framework"] = "pytorch"
    read = sorted({line.number: line for line, _ in versions.values()}.values(), key=lambda line: line.number)
    text = "\n".join(line.original for line in read)
    return doc.event("software-stack", read[0], fields, text=text)


def _sentence(text: str, pattern: regex.Pattern) -> str | None:
    """The sentence of `text` in which `pattern` is found, or None."""
    for sentence in _SENTENCE_END.split(text):
        if ((hit := pattern.search(sentence)) and not NEGATION.search(sentence, 0, hit.start())
                and not CONDITIONAL.search(sentence, 0, hit.start())):
            return sentence.strip()[:MAX_SENTENCE]
    return None
