"""Every pattern postmortem runs costs time linear in its input (issue 13 item 7; issue 14 item 6).

Generated, like the attacks that found the quadratic ones: every pattern postmortem compiles (module and class
attributes, each member of a table of them, patterns written inline in calls, the signature database's rules,
and, caught as they are compiled by tests/pattern_census.py, those built at run time from the tables under
postmortem/data/) is searched in lines of 50,000 characters made of its own literals and adversarial runs:
the anchor with a run after it, before it, around it and between two copies; the anchor repeated, alone and
with a short run of one character after each copy; the pattern's literals in order, joined by a character its
quantified parts accept. The runs are digits, dots, blanks, ... and, for each character class the pattern
quantifies, a character that class accepts. A pattern with nested or overlapping quantifiers, one that
rescans a run from every start position, or one that scans the rest of the line from every copy of its anchor
takes seconds on such a line; a linear one takes a few milliseconds.
"""

from __future__ import annotations

import ast
import importlib
import pickle
import pkgutil
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import regex
import yaml
from click.testing import CliRunner

import postmortem
from postmortem.cli import main
from postmortem.later import LazyPattern
from postmortem.lint import check_patterns, nested_quantifiers
from postmortem.model import Event, Location
from postmortem.signatures import MATCH_WINDOW, compile_condition, load_default

LINE = 50_000
"""Characters of each adversarial line: the attack's 50 KB (some paths hand a pattern more than text.MAX_LINE)."""

FRAGMENTS = {
    "digits": "0", "dots": ".", "spaces": " ", "tabs": "\t", "letters": "a", "hex-prefix": "0x", "slashes": "/",
    "colons": ":", "equals": "=", "unicode": "é中", "word-space": "a ", "word-dot": "a.",
}
"""The fixed kinds of run (each repeated to the line's length); the pattern's own classes add theirs."""

POOL = "0a .:/-_=\t,;'\"()[]{}<>@#x9fAZé中\\|*+?!$%&^~`"
"""Candidates for a character a quantified class accepts: one of each kind of character text holds."""

LITERALS_FOLLOWED = 8
"""The pattern's other literals (after its anchors) each followed by a run: the words of an alternation's later
branches (`error` in `cuda\\s+error|error\\s*[:=]?\\s*(\\d+)`) hang a match too."""
REPEAT_GAPS = (1, 8)
"""Run lengths after each copy of a repeated anchor: right after it, and a field's width away."""

LINE_BOUND_S = 0.5
"""Most one search of one such line may take. Linear patterns take a few milliseconds here, the big alternations
(every CUDA message, every source's anchor, the triage's log-line shapes) up to 0.3 s; one that rescans the rest
of the line from every copy of its anchor, or splits a run between two quantifiers, takes 0.6 s to minutes (the
attack's fourteen: 1 to over 20 s). A slow line gets two more tries, against noise."""
GIVE_UP_S = 1.0
"""Where a search of the regex engine is cut short (its `timeout`): far past the bound, it only keeps a
superlinear pattern from holding the run for minutes."""
GROWTH_BOUND = 8.0
"""Most a search over the bound may grow from a quarter of the line to the whole: a linear pattern grows about 4x,
one that rescans from every position 16x. The ratio, not the time, is what a busy machine (pytest-xdist's workers,
CI under load) leaves alone: both searches slow down together."""

Pattern = regex.Pattern | re.Pattern
_CALLS = {"compile", "search", "match", "fullmatch", "sub", "subn", "findall", "finditer", "split"}
HERE = Path(__file__).parent


def _walk(value: object, depth: int = 0) -> Iterator[tuple[str, Pattern]]:
    """(suffix, pattern) for a pattern or each one in a container: `[i]` or `[key]` names a member."""
    if isinstance(value, (regex.Pattern, re.Pattern)):
        yield "", value
    elif isinstance(value, LazyPattern):  # compiled on first use (postmortem/later.py): compiled here
        yield "", value.compiled()
    elif depth < 3 and isinstance(value, (tuple, list, set, frozenset)):
        for i, item in enumerate(value):
            for suffix, pattern in _walk(item, depth + 1):
                yield f"[{i}]{suffix}", pattern
    elif depth < 3 and isinstance(value, dict):
        for i, (key, item) in enumerate(value.items()):
            for suffix, pattern in (*_walk(key, depth + 1), *_walk(item, depth + 1)):
                yield f"[{i}]{suffix}", pattern


def _inline(path: Path) -> Iterator[tuple[str, Pattern]]:
    """Patterns written as literals in calls (`regex.match(r"...", text)`), which no module attribute holds."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _CALLS
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ("re", "regex") and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, (str, bytes))):
            engine = regex if node.func.value.id == "regex" else re
            yield f"{path.name}:{node.lineno}", engine.compile(node.args[0].value)


def _census() -> Iterator[tuple[str, Pattern]]:
    """The patterns compiled while a fresh interpreter imports, builds and runs everything (pattern_census.py)."""
    out = subprocess.run([sys.executable, str(HERE / "pattern_census.py")], capture_output=True, check=True).stdout
    for where, pattern in pickle.loads(out):
        yield f"compiled at {where}", pattern


def all_patterns() -> dict[str, Pattern]:
    """Every pattern postmortem compiles, by where it lives (first name wins for a shared pattern)."""
    found: dict[tuple, tuple[str, Pattern]] = {}
    names: dict[str, int] = {}

    def add(where: str, pattern: Pattern) -> None:
        key = (type(pattern), pattern.pattern, pattern.flags)
        if key not in found:
            names[where] = names.get(where, 0) + 1
            found[key] = (where if names[where] == 1 else f"{where} #{names[where]}", pattern)

    for info in pkgutil.walk_packages(postmortem.__path__, "postmortem."):
        if info.name.endswith("__main__") or info.name == "postmortem.later":
            continue  # later's registry of patterns compiled on first use: each is named where it is written
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            for suffix, pattern in _walk(value):
                add(f"{info.name}.{name}{suffix}", pattern)
            if isinstance(value, type) and value.__module__ == module.__name__:
                for attribute, member in vars(value).items():
                    for suffix, pattern in _walk(member):
                        add(f"{info.name}.{name}.{attribute}{suffix}", pattern)
        if module.__file__ and module.__file__.endswith(".py"):
            for where, pattern in _inline(Path(module.__file__)):
                add(f"{info.name}@{where}", pattern)
    for signature in load_default().signatures:
        for i, pattern in enumerate(signature.patterns):
            add(f"signature {signature.id}[{i}]", pattern)
    for where, pattern in _census():
        add(where, pattern)
    return dict(found.values())


def _text(pattern: Pattern) -> str:
    return pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode("latin-1")


def _scan(pattern: Pattern) -> tuple[list[str], list[str]]:
    """The runs of literal characters in a pattern's text, in order (a quantified character ends a run), and
    the pattern's character classes, quantified literals and wildcards (each as pattern text)."""
    text = _text(pattern)
    verbose = bool(pattern.flags & re.VERBOSE)
    runs, classes, run, i = [], [], "", 0

    def cut() -> None:
        nonlocal run
        if run:
            runs.append(run)
        run = ""

    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            escaped = text[i + 1]
            if escaped.isalnum():
                cut()
                end = text.index("}", i) + 1 if escaped in "pP" and text[i + 2 : i + 3] == "{" else i + 2
                classes.append(text[i:end])
                i = end
            else:
                run += escaped
                i += 2
        elif c == "[":
            cut()
            start = i
            i += 1 + (text[i + 1 : i + 2] == "]") + (text[i + 1 : i + 3] == "^]")
            while i < len(text) and text[i] != "]":
                i += 2 if text[i] == "\\" else 1
            i += 1
            classes.append(text[start:i])
        elif c == "(" and text[i + 1 : i + 2] == "?":
            cut()
            close = re.match(r"\(\?(?:P?<\w+>|[:>=!|]|<[=!]|[a-zA-Z-]*[:)])", text[i:])
            i += close.end() if close else 2
        elif c in "*+?{":
            if run and c != "?":  # a run repeats the character; an optional one is there once at most
                classes.append(re.escape(run[-1]))
            run = run[:-1]  # the quantified character is not certain to be there
            cut()
            i = text.index("}", i) + 1 if c == "{" and "}" in text[i:] else i + 1
        elif c == ".":
            cut()
            classes.append(".")
            i += 1
        elif c in "()|^$":
            cut()
            i += 1
        elif verbose and c == "#":
            cut()
            end = text.find("\n", i)
            i = len(text) if end == -1 else end + 1
        elif verbose and c.isspace():
            i += 1
        else:
            run += c
            i += 1
    cut()
    return runs, classes


def literals(pattern: Pattern) -> list[str]:
    """The runs of literal characters in a pattern's text, in order."""
    return _scan(pattern)[0]


def anchors(pattern: Pattern) -> list[str]:
    """The pattern's first literal and its longest one (what its match hangs on)."""
    runs = literals(pattern)
    return list(dict.fromkeys([runs[0], max(runs, key=len)])) if runs else [""]


def class_characters(pattern: Pattern) -> list[str]:
    """For each class the pattern holds, the POOL character the most of its classes accept: runs of such a
    character are what overlapping quantifiers split in many ways."""
    flags = pattern.flags & ~re.VERBOSE if isinstance(pattern, re.Pattern) else pattern.flags & ~regex.VERBOSE
    engine = re if isinstance(pattern, re.Pattern) else regex
    raw = isinstance(pattern.pattern, bytes)
    pool = [c for c in POOL if not raw or c.isascii()]
    accepted = []
    for atom in dict.fromkeys(_scan(pattern)[1]):
        try:
            compiled = engine.compile(atom.encode("latin-1") if raw else atom, flags)
        except (re.error, regex.error, UnicodeEncodeError):
            continue
        chars = {c for c in pool if compiled.fullmatch(c.encode() if raw else c)}
        if chars:
            accepted.append(chars)
    chosen = {max(chars, key=lambda c: (sum(c in other for other in accepted), -pool.index(c)))
              for chars in accepted}
    return sorted(chosen, key=pool.index)


def _fill(piece: str, length: int = LINE) -> str:
    return (piece * (length // max(1, len(piece)) + 1))[:length] if piece else ""


def lines(pattern: Pattern) -> Iterator[tuple[str, str]]:
    """(label, line of LINE characters) for each shape of adversarial line."""
    chars = class_characters(pattern)
    runs = {**FRAGMENTS, **{f"class {c!r}": c for c in chars if c not in FRAGMENTS.values()}}
    for anchor in anchors(pattern):
        for name, piece in runs.items():
            run, half = _fill(piece, LINE - len(anchor)), _fill(piece, (LINE - len(anchor)) // 2)
            for place, line in (("after", anchor + run), ("before", run + anchor),
                                ("around", half + anchor + run[: LINE - len(anchor) - len(half)]),
                                ("between", anchor + run[len(anchor):] + anchor)):
                yield f"{name} {place} {anchor!r}", line
        yield f"{anchor!r} repeated", _fill(anchor)
        for c in dict.fromkeys([" ", *chars]):
            for gap in REPEAT_GAPS:
                yield f"{anchor!r} + {c!r}*{gap} repeated", _fill(anchor + c * gap)
    runs_in_order = literals(pattern)
    for literal in [run for run in dict.fromkeys(runs_in_order) if run not in anchors(pattern)][:LITERALS_FOLLOWED]:
        for c in dict.fromkeys([" ", *chars]):
            yield f"{literal!r} + {c!r} run", literal + _fill(c, LINE - len(literal))
    for c in dict.fromkeys(["", " ", *chars]):
        yield f"literals joined by {c!r} repeated", _fill(c.join(runs_in_order) + c)
        if len(runs_in_order) > 1:
            yield f"literals but the last joined by {c!r} repeated", _fill(c.join(runs_in_order[:-1]) + c)


def search_time(pattern: Pattern, line: str, give_up_s: float = GIVE_UP_S) -> float:
    """Seconds one search of the line takes (give_up_s at most for the regex engine)."""
    started = time.perf_counter()
    if isinstance(pattern, re.Pattern):
        pattern.search(line if isinstance(pattern.pattern, str) else line.encode("utf-8"))
    else:
        try:
            pattern.search(line if isinstance(pattern.pattern, str) else line.encode("utf-8"), timeout=give_up_s)
        except TimeoutError:
            return give_up_s
    return time.perf_counter() - started


PATTERNS = all_patterns()


def test_the_collection_is_complete():
    """The walk reaches the sources, each member of a table of patterns, the signature rules, inline patterns and
    those compiled at run time from the data tables (a broken walk would pass everything)."""
    names = list(PATTERNS)
    assert len(names) > 600
    assert any(name.startswith("signature ") for name in names)
    assert any("@" in name for name in names)
    assert "postmortem.sources.frameworks.cuda_runtime._OOM" in names  # a subpackage's module is walked too
    assert anchors(PATTERNS["postmortem.sources.frameworks.cuda_runtime._OOM"])[0] == "CUDA"
    texts = {_text(pattern) for pattern in PATTERNS.values()}
    assert any(text.startswith("file=(?P<file>") for text in texts)  # a member of a tuple of patterns
    assert sum(name.startswith("compiled at sources/health_tests.py") for name in names) > 50


def test_lines_are_built_from_the_pattern():
    pattern = regex.compile(r"Detected\s+-?\d+\s+.*?\s+NvLink errors\s+on\s+GPU")
    assert literals(pattern) == ["Detected", "NvLink errors", "on", "GPU"]
    assert class_characters(pattern) == ["0", " "]
    built = dict(lines(pattern))
    assert all(len(line) == LINE for line in built.values())
    assert built["literals joined by ' ' repeated"].startswith("Detected NvLink errors on GPU Detected ")
    assert built["'Detected' + '0'*8 repeated"].startswith("Detected00000000Detected")
    assert built["'on' + ' ' run"] == "on" + " " * (LINE - 2)


def superlinear(pattern: Pattern, line: str) -> str | None:
    """Why one search of `line` shows the pattern superlinear, or None: a search over LINE_BOUND_S (the fastest of
    three) that reached GIVE_UP_S, or grew more than GROWTH_BOUND from a quarter of the line."""
    if search_time(pattern, line) <= LINE_BOUND_S:
        return None
    took = min(search_time(pattern, line), search_time(pattern, line))
    if took <= LINE_BOUND_S:
        return None
    quarter = min(search_time(pattern, line[:len(line) // 4]), search_time(pattern, line[:len(line) // 4]))
    if took < GIVE_UP_S and quarter < GIVE_UP_S and took <= GROWTH_BOUND * max(quarter, 0.001):
        return None  # slow only because the machine is busy: it grew as a linear search grows
    return f"{took * 1000:.0f} ms, a quarter of the line {quarter * 1000:.0f} ms"


def test_the_lines_catch_the_attacks_patterns():
    """Two of the patterns the attack found slow, as they were: some line of each shows them superlinear (the 8 KB
    lines of anchors and runs did not catch them)."""
    for text in (r"(?i)(?:cuda\s+failure|cuda\s+error|runtime\s+error|error\s+code|error|code)\s*[:=]?\s*\(?"
                 r"(\d{1,5})(?!\d)\)?|==\s*cudaSuccess\s*\((\d{1,5}) vs\. 0\)",
                 r"(?:INFO: )?\btask (?P<task>.+?):(?P<pid>\d+) blocked for more than (?P<seconds>\d+) seconds"):
        pattern = regex.compile(text)
        assert any(superlinear(pattern, line) for _, line in lines(pattern)), text


@pytest.mark.parametrize("where", sorted(PATTERNS))
def test_pattern_is_linear_on_adversarial_lines(where):
    pattern = PATTERNS[where]
    for label, line in lines(pattern):
        why = superlinear(pattern, line)
        assert why is None, f"{where} /{_text(pattern)}/ is superlinear: {label}: {why}"


# ---------------------------------------------------------------- the signature window and the lint check

def _event(text: str, **fields) -> Event:
    return Event(kind="nccl-warn", where=Location("nccl.log", 1, 1), text=text, fields=fields)


def test_signature_patterns_read_only_the_match_window():
    condition = compile_condition({"any": [{"text": r"\bNVLS\b"}, {"fields": {"message": {"regex": "NVLS"}}}]})
    assert condition(_event("NCCL WARN NVLS multicast failed"))
    assert condition(_event("x", message="NCCL WARN NVLS multicast failed"))
    assert not condition(_event(" " * MATCH_WINDOW + "NVLS"))
    assert not condition(_event("x", message=" " * MATCH_WINDOW + "NVLS"))


@pytest.mark.parametrize("pattern, nested", [
    (r"(\d+)+", [r"(\d+)+"]), (r"(?:a*b?)*x", ["(?:a*b?)*"]), (r"((a+)b)*", ["((a+)b)*"]),
    (r"(?P<n>\w+)*", [r"(?P<n>\w+)*"]), (r"(?:x{2,})+", ["(?:x{2,})+"]), (r"(?:[\w.~-]*/)+", [r"(?:[\w.~-]*/)+"]),
    (r"(\d++)+", []), (r"(?>\d+)+", []), (r"(\d+)++", []), (r"(?:x{2,5})*", []), (r"a(b|c)*d", []),
    (r"\(\d+\)+", []), (r"[(]+\d+", []), (r"(?i)foo.*bar", []), (r"(?=a+)*", []), (r"[]a+]*", []),
])
def test_nested_quantifiers_are_found(pattern, nested):
    assert nested_quantifiers(pattern) == nested


def test_nested_quantifiers_survives_a_trailing_backslash():
    # a lone backslash at the end escapes nothing: the scan stops there instead of failing on a missing match
    assert nested_quantifiers("(a+)+\\") == ["(a+)+"]
    assert nested_quantifiers("\\") == []


def test_the_bundled_database_nests_no_quantifier():
    assert [problem for signature in load_default().signatures for problem in check_patterns(signature)] == []


def test_signatures_lint_refuses_a_nested_quantifier(tmp_path):
    (tmp_path / "pack.yaml").write_text(yaml.safe_dump({"signatures": [{
        "id": "slow-rule", "title": "A slow rule", "cause": "gpu-oom", "severity": "error", "confidence": 0.5,
        "match": {"kind": "nccl-warn", "fields": {"message": {"regex": r"(\d+\s?)+MiB"}}},
        "explain": "x", "actions": ["y"],
        "examples": {"positive": ["NCCL WARN 12 MiB"], "negative": ["nothing"]},
    }]}))
    result = CliRunner().invoke(main, ["signatures", "lint", "--signatures", str(tmp_path)])
    assert result.exit_code == 1
    assert r"slow-rule: pattern /(\d+\s?)+MiB/ nests quantifiers in '(\\d+\\s?)+'" in result.output


# ---------------------------------------------------------------- the linear rewrites read what the old patterns read

def test_rewritten_patterns_read_the_same_fields():
    """Values taken from the patterns before their rewrite (possessive runs, start-of-run lookbehinds, greedy-to-last-
    non-blank instead of lazy-then-blanks); the source suites cover the rest."""
    from postmortem.fingerprint import mask
    from postmortem.sources import gpu_tools, kernel_log, nccl_log
    from postmortem.sources.frameworks import arch, cuda_runtime

    assert nccl_log._DUMP_PATH.search("dumping debug info to /tmp/dumps/nccl_trace_rank_3 now")[1] == \
        "/tmp/dumps/nccl_trace_rank_3"
    assert nccl_log._FOLD_NOISE.sub("#", "peer 10.0.0.1<43211> 0x7f00ab failed 12 times, dev abc1") == \
        "peer # # failed # times, dev #"
    warn = nccl_log._WARN.search("node1:123:456 [0] misc/socket.cc:50 NCCL WARN Net : Connection closed   ")
    assert (warn["host"], warn["src"], warn["message"]) == ("node1", "misc/socket.cc:50", "Net : Connection closed")
    oops = kernel_log._OOPS.search("BUG: unable to handle kernel paging request at ffffffffc0a3c000")
    assert (oops["what"], oops["address"]) == ("BUG: unable to handle kernel paging request", "ffffffffc0a3c000")
    assert gpu_tools._KEY_VALUE.match("    Product Name     :  NVIDIA A100  ").groupdict() == \
        {"indent": "    ", "key": "Product Name", "value": " NVIDIA A100"}
    assert arch._RESOURCES.search("out of resource: shared memoryRequired: 65536Hardware limit: 49152") \
        .group("resource", "required", "limit") == ("shared memory", "65536", "49152")
    assert cuda_runtime._OOM.search("PxgCudaDeviceMemoryAllocator fail to allocate memory of 12 bytes")
    assert mask("error in /home/user/x/y.py and ./a/b.c") == "error in <path>/y.py and <path>/b.c"
