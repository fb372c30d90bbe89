"""Every pattern postmortem runs costs time linear in its input (issue 13, item 7).

Generated, like the attack that found the quadratic ones: every compiled pattern in
postmortem/ (module and class attributes, patterns written inline in calls, and the
signature database's compiled rules) is searched in lines made of its own literal
anchors and an adversarial run (8,000 digits, dots, blanks, ...) after the anchor,
before it, on both sides, and between two anchors (a run inside the text a pattern
spans). A pattern with nested or overlapping quantifiers, or one that rescans a run
from every start position, takes seconds on such a line; a linear one takes well
under a millisecond here.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import regex
import yaml
from click.testing import CliRunner

import postmortem
from postmortem.cli import main
from postmortem.lint import check_patterns, nested_quantifiers
from postmortem.model import Event, Location
from postmortem.signatures import MATCH_WINDOW, compile_condition, load_default

RUN = 8000
"""Characters of each adversarial run: just under text.MAX_LINE, the most of a line any pattern is given."""

FRAGMENTS = {
    "digits": "0" * RUN, "dots": "." * RUN, "spaces": " " * RUN, "tabs": "\t" * RUN, "letters": "a" * RUN,
    "hex-prefix": "0x" * (RUN // 2), "slashes": "/" * RUN, "colons": ":" * RUN, "equals": "=" * RUN,
    "unicode": "é中" * (RUN // 2), "word-space": "a " * (RUN // 2), "word-dot": "a." * (RUN // 2),
    "blank-gap": "a" + " " * RUN + "a",
}

LINE_BOUND_S = 0.05
"""Most one search of one such line may take. A linear pattern takes about a millisecond here (the slowest,
kernel_log's process name of at most 64 characters tried after every blank, about 15 ms); a quadratic one takes
0.07 s to many seconds. 50 ms leaves CI machines three times this one's slowness; a slow line gets a second try,
against noise."""

Pattern = regex.Pattern | re.Pattern
_CALLS = {"compile", "search", "match", "fullmatch", "sub", "subn", "findall", "finditer", "split"}


def _walk(value: object, depth: int = 0) -> Iterator[Pattern]:
    if isinstance(value, (regex.Pattern, re.Pattern)):
        yield value
    elif depth < 3 and isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            yield from _walk(item, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(key, depth + 1)
            yield from _walk(item, depth + 1)


def _inline(path: Path) -> Iterator[tuple[str, Pattern]]:
    """Patterns written as literals in calls (`regex.match(r"...", text)`), which no module attribute holds."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _CALLS
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ("re", "regex") and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, (str, bytes))):
            engine = regex if node.func.value.id == "regex" else re
            yield f"{path.name}:{node.lineno}", engine.compile(node.args[0].value)


def all_patterns() -> dict[str, Pattern]:
    """Every pattern postmortem compiles, by where it lives (first name wins for a shared pattern)."""
    found: dict[tuple, tuple[str, Pattern]] = {}

    def add(where: str, pattern: Pattern) -> None:
        found.setdefault((type(pattern), pattern.pattern, pattern.flags), (where, pattern))

    for info in pkgutil.walk_packages(postmortem.__path__, "postmortem."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            for pattern in _walk(value):
                add(f"{info.name}.{name}", pattern)
            if isinstance(value, type) and value.__module__ == module.__name__:
                for attribute, member in vars(value).items():
                    for pattern in _walk(member):
                        add(f"{info.name}.{name}.{attribute}", pattern)
        if module.__file__ and module.__file__.endswith(".py"):
            for where, pattern in _inline(Path(module.__file__)):
                add(f"{info.name}@{where}", pattern)
    for signature in load_default().signatures:
        for pattern in signature.patterns:
            add(f"signature {signature.id}", pattern)
    return dict(found.values())


def literals(pattern: Pattern) -> list[str]:
    """The runs of literal characters in a pattern's text, in order (a quantified character ends a run)."""
    text = pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode("latin-1")
    verbose = bool(pattern.flags & re.VERBOSE)
    runs, run, i = [], "", 0

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
            else:
                run += escaped
            i += 2
        elif c == "[":
            cut()
            i += 1 + (text[i + 1 : i + 2] == "]")
            while i < len(text) and text[i] != "]":
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif c == "(" and text[i + 1 : i + 2] == "?":
            cut()
            close = re.match(r"\(\?(?:P?<\w+>|[:>=!]|<[=!]|[a-zA-Z-]*[:)])", text[i:])
            i += close.end() if close else 2
        elif c in "*+?{":
            run = run[:-1]  # the quantified character is not certain to be there
            cut()
            i = text.index("}", i) + 1 if c == "{" and "}" in text[i:] else i + 1
        elif c in "()|.^$":
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
    return runs


def anchors(pattern: Pattern) -> list[str]:
    """The pattern's first literal and its longest one (what its match hangs on)."""
    runs = literals(pattern)
    return list(dict.fromkeys([runs[0], max(runs, key=len)])) if runs else [""]


def lines(pattern: Pattern) -> Iterator[tuple[str, str]]:
    """(label, line) for each anchor, fragment and placement."""
    for anchor in anchors(pattern):
        for name, run in FRAGMENTS.items():
            half = run[: RUN // 2]
            for place, line in (("after", anchor + run), ("before", run + anchor), ("around", half + anchor + half),
                                ("between", anchor + run + anchor)):
                yield f"{name} {place} {anchor!r}", line


def _search_time(pattern: Pattern, line: str) -> float:
    subject = line if isinstance(pattern.pattern, str) else line.encode("utf-8")
    started = time.perf_counter()
    pattern.search(subject)
    return time.perf_counter() - started


PATTERNS = all_patterns()


def test_the_collection_is_complete():
    """The walk reaches the sources, the signature rules and inline patterns (a broken walk would pass everything)."""
    names = list(PATTERNS)
    assert len(names) > 300
    assert any(name.startswith("signature ") for name in names)
    assert any("@" in name for name in names)
    assert "postmortem.sources.framework_log._OOM" in names
    assert anchors(PATTERNS["postmortem.sources.framework_log._OOM"])[0] == "CUDA"


@pytest.mark.parametrize("where", sorted(PATTERNS))
def test_pattern_is_linear_on_adversarial_lines(where):
    pattern = PATTERNS[where]
    slow = []
    for label, line in lines(pattern):
        if _search_time(pattern, line) > LINE_BOUND_S:
            took = min(_search_time(pattern, line), _search_time(pattern, line))
            if took > LINE_BOUND_S:
                slow.append(f"{label}: {took * 1000:.0f} ms")
    assert not slow, f"{where} /{pattern.pattern}/ is superlinear: {slow}"




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
    from postmortem.sources import framework_log, gpu_tools, kernel_log, nccl_log

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
    assert framework_log._RESOURCES.search("out of resource: shared memoryRequired: 65536Hardware limit: 49152") \
        .group("resource", "required", "limit") == ("shared memory", "65536", "49152")
    assert framework_log._OOM.search("PxgCudaDeviceMemoryAllocator fail to allocate memory of 12 bytes")
    assert mask("error in /home/user/x/y.py and ./a/b.c") == "error in <path>/y.py and <path>/b.c"
