"""An error line no table holds, read by the words a person would read it by: the reader after the last resort.

Every other source knows a layout (kernel_log) or a wording (mentions: a CUDA error's message, a phrase of
data/cause-phrases.tsv). Programs keep writing the same few facts in wordings of their own: HeavyDB's
`ALLOCATION failed to find 256000000B throwing out of memory GPU_MGR:3`, TensorRT-LLM's `Executor creation failed
due to insufficient GPU memory`, Ray's `/dev/shm has only 46964736 bytes available`, a memory tester's `45528 errors
so far`. A person reads each at a glance, by two kinds of words on one line: what went wrong (out of memory,
errors, not supported) and what it happened to (the GPU, the host, shared memory, the architecture). This source
reads a line the same way, by the word groups of data/error-words.tsv: a row's cause when every group of the row
has a word on the line and no word of its `unless` does (a GPU's out-of-memory row is unless the line names the host,
and the host's unless it names the GPU).

It reads only the lines no other source turned into an event, and what it makes is the weakest evidence there is:
an `error-words` event, whose finding (signatures/words.yaml) ranks after every finding a program's own report
supports and explains none of them (rank.WEAK). It is the answer where nothing else is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache

import regex

from .. import knowledge, later
from ..model import LOOSE, Event, Unread
from ..prefilter import ANY_CASE
from ..text import FENCE_ANCHORS, Line, TextDoc, fence_sides
from .mentions import DOCUMENTED, causeless, lines_read

NAME = "error-words"
READS = ("text", "prose")
"""Logs, and the logs a person pasted between the code fences of a Markdown text; the prose around them is read by
reporter_words, which knows a symptom told from one denied or guessed."""
READS_UNCLAIMED = True
TABLE = "error-words.tsv"

_EDGE_BEFORE = r"(?<![A-Za-z])"
_EDGE_AFTER = r"(?![A-Za-z])"
"""A word's edges are letters only, so that `GPU_MGR`, `CUDA3 buffer`, `GPU0` and `OOM:` hold their words."""
_PLACEHOLDERS = {"{num}": r"(?<![\d,.])\d[\d,.]*+", "{name}": r"\S{1,64}+"}
"""A number read from its first digit only, so a run of digits costs one attempt."""
MAX_LINE = 1000
"""Characters of a line read: an error line is short, and a longer one is data (a tensor, a base64 blob)."""


@dataclass(frozen=True)
class WordsRow:
    """One row of data/error-words.tsv, compiled: its groups, each a pattern of alternatives."""

    cause: str
    groups: tuple[regex.Pattern, ...]
    unless: regex.Pattern | None
    words: str

    def reads(self, text: str) -> list[str] | None:
        """The word of each group the line holds, or None when a group has none or an `unless` word stands."""
        hits = []
        for group in self.groups:
            if (hit := group.search(text)) is None:
                return None
            hits.append(hit)
        first = min(hit.start() for hit in hits)
        if knowledge.NEGATION.search(text, max(0, first - 30), first) or knowledge.CONDITIONAL.search(text, 0, first):
            return None  # denied or made a condition before its first word; "not enough memory on GPU 1" denies nothing
        if self.unless is not None and self.unless.search(text):
            return None
        return [hit.group(0) for hit in hits]


def _alternatives(cell: str) -> regex.Pattern:
    """`out of memory|oom|failed to allocate` as one pattern: each wording's words with any blanks, `_` or `-`
    between them, at word edges, in any letter case, a last word also in its plural (`not supported on Pascal and
    older architectures`: rapidsai/clx#358). Chinese words stand without edges, as Chinese is written (`16g内存不足`,
    `显存不足`: T8mars/Comfyui-YuE2-T8#11)."""
    wordings = []
    for wording in cell.split("|"):
        tokens = [t for t in regex.split(r"(\{[a-z]+\})|\s+", wording.strip()) if t]
        body = r"[\s_-]*+".join(_PLACEHOLDERS.get(t) or knowledge.typed(t) for t in tokens)
        latin_start, latin_end = tokens[0][:1].isascii(), tokens[-1][-1:].isascii()  # CJK words have no edges
        plural = "(?:e?s)?" if tokens[-1][-1:].isalpha() and latin_end else ""
        wordings.append(_EDGE_BEFORE * latin_start + body + plural + _EDGE_AFTER * latin_end)
    return later.compile("|".join(wordings), regex.IGNORECASE)


@cache
def rows() -> tuple[WordsRow, ...]:
    return tuple(WordsRow(row["cause"], tuple(_alternatives(g) for g in row["words"].split(" + ")),
                          _alternatives(unless) if (unless := knowledge.dash(row["unless"])) else None, row["words"])
                 for row in knowledge.data_rows(TABLE))


_COMMON = frozenset({"the", "has", "been", "is", "of", "to", "off", "not", "no", "gpu", "out", "run", "ran"})
"""Words too common in logs to pick a wording's lines out (`off the bus` is found by `bus`)."""


def _anchor_words() -> tuple[bytes, ...]:
    """The longest uncommon word of each wording of each row's first group, found in any letter case (the rows match
    so: XLA's `cuSolver`, a shouting `OUT OF MEMORY`): a line without one holds no row's first group."""
    words = set()
    for row in knowledge.data_rows(TABLE):
        for wording in row["words"].split(" + ")[0].split("|"):
            pieces = [p for p in regex.split(r"\{[a-z]+\}|\s+", wording.strip()) if p]
            words.add(max([p for p in pieces if p.lower() not in _COMMON] or pieces, key=len).lower())
    return tuple(sorted(ANY_CASE + w.encode() for w in words))


REPEATS = _anchor_words()
ANCHORS = REPEATS + FENCE_ANCHORS
"""A storm of identical lines folds as it is read: a repeat holds the same words, and a format reader that folds its
storms (nvidia-smi's rows of ERR!) keeps folding where it shares an anchor with this one."""


_PROMPT = later.compile(r"^[\s>]*+(?:[\w.-]++@[\w.-]++)?(?::\S*?)?[ \t]*+[$#%][ \t]++[a-z]")
"""A command at a shell prompt (`core@gpu-node:~ $ dmesg -T | grep oom`): what a person typed, not what went wrong."""


_HEDGE = later.compile(
    r"(?i)\b(?:potential|possible)\s++(?:root\s++)?(?:causes|reasons)\b|\bone of the following\b"
    r"|\b(?:could|might|may)\s++(?:be\s++)?(?:caused\s++by|due\s++to)\b|\bit is possible that\b"
    r"|\bthis (?:might|may|could) be\b")
"""A program's list of what might have happened (Ray's "There are some potential root causes. (1) The process is
killed by SIGKILL by OOM killer ...", vllm-project/vllm#586): a guess among several, not a report of one."""


def parse(doc: TextDoc, lines: list[Line], earlier: Sequence[Event] = (),
          unread: list[Unread] | None = None) -> Iterator[Event]:
    """An `error-words` event for the first row each line satisfies, on the lines no earlier event read into a
    cause (nor a repeat of one they folded; a traceback's exception line is still read), no prompt stands on and no
    hedge; none in documentation (an input whose codes `mentions` found in a template)."""
    if any(u.reason == DOCUMENTED for u in unread or ()):
        return
    if doc.kind == "prose":  # what a person wrote: only the logs they pasted between its fences
        lines, _ = fence_sides(lines)
    read = lines_read([e for e in earlier if e.where.path == doc.path and e.where.line is not None
                       and not causeless(e)])  # a traceback's exception holds words that explain nothing yet
    for line in lines:
        if read.hold(line) or _PROMPT.match(line.text) or _HEDGE.search(line.text):
            continue
        text = line.text[:MAX_LINE]
        for row in rows():
            if (words := row.reads(text)) is not None:
                yield doc.event("error-words", line, {"cause": row.cause, "words": " + ".join(words),
                                                      "read": LOOSE})
                break
