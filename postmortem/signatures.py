"""The signature database: YAML entries that turn events into findings.

Each `signatures/*.yaml` file holds `signatures:` (a list of entries) and may
hold `causes:` (the cause vocabulary with its layer and rank). Loading checks
every entry and lists every problem at once, each at its file:line; conditions
are compiled once into a tree of rules (`Rule`), so matching is a walk over
events with no re-parsing, and `trace` shows which part of a condition held.

A condition is a mapping; every key present must hold:

- `kind`: an event kind, or a list of kinds;
- `text`: a regex searched in the event's verbatim text;
- `fields`: {name: expected}; expected is a value, a list of values, or a
  mapping with one of `regex`, `gte`, `lte`, `exists`, or `version` (dotted
  numbers against comma-separated bounds: ">=525, <525.105.17");
- `count`: {gte: N} and/or {lte: N} on the event's `count` (identical reports a
  source folded into it), so a storm of many correctable errors can be told
  from one;
- `any` / `all`: lists of conditions; `not`: one condition.

Explanation templates (`explain`) use `{field}` placeholders filled from the
first evidence event. A part in `[[...]]` is kept only when every placeholder
inside it is known, so one template reads well with or without the facts
(`The GPU[[ at {pci}]] stopped answering`); such parts may nest. Every
placeholder of a bundled template sits in such a part (tests/test_explanations.py),
so no `?` or `{name}` ever reaches a reader: a placeholder outside one that
the event cannot fill is left out.
"""

from __future__ import annotations

import hashlib
import string
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import later
from .model import LOOSE, LOOSE_FACTOR, SEVERITIES, Event, Finding, written_span

if TYPE_CHECKING:
    import regex
    import yaml

Condition = Callable[[Event], bool]

REQUIRED = ("id", "title", "cause", "severity", "confidence", "match", "explain", "actions")
OPTIONAL = ("references", "examples", "notes", "role")
ROLES = ("root", "consequence")
"""`consequence`: the signature matches a report that by definition summarises an earlier failure
(Xid 154, "reset required", a failed probe); it never stands as the root while a root is known."""




MATCH_WINDOW = 64 * 1024
"""Most characters of an event's text, or of one field, that a signature's regex reads (from the start).

Every line reaches us cut to text.MAX_LINE around its anchor, and the patterns are linear
(tests/test_regex_time.py), but an event may fold a long block (a traceback, a dump); its
report's words sit in its first lines. 64 Ki is eight full lines: more than any rule needs,
and a bound on what one rule costs per event whatever the input.
"""


@dataclass(frozen=True)
class Flaw:
    """One problem of a signature file, at the YAML line that holds it: loading and lint list them all at once."""

    path: Path
    line: int
    signature: str
    """The entry's id, or '' for a problem of the file itself."""
    message: str
    detail: tuple[str, ...] = ()
    """Lines that show why (a positive example's match trace)."""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: " + (f"{self.signature}: " if self.signature else "") + self.message


class SignatureError(Exception):
    """A signature file or entry is invalid; the message names file:line and entry, one line per problem."""

    def __init__(self, message: str, flaws: Sequence[Flaw] = ()) -> None:
        super().__init__(message)
        self.flaws = tuple(flaws)


@dataclass(frozen=True)
class Cause:
    """One entry of the cause vocabulary (causes.md): its layer and how it ranks.

    `rank` orders causes when findings compete: a higher rank is more likely
    the root (bad memory explains the illegal-address error that follows it).
    """

    name: str
    layer: str
    rank: int
    summary: str
    reach: str = "process"
    """"machine" when the fault is the node's and touches every process on it (postmortem.scope)."""


@dataclass(frozen=True)
class Signature:
    """One known cause pattern, loaded and compiled."""

    id: str
    title: str
    cause: str
    severity: str
    confidence: float
    explain: str
    actions: tuple[str, ...]
    references: tuple[str, ...]
    examples: Mapping[str, tuple[str | Mapping[str, str], ...]]
    """"positive"/"negative" -> real log text, or {file: path} (relative to the repo) for binary inputs such as
    cores."""
    condition: Condition
    origin: str
    rule: Rule
    """The condition as a tree of its parts (`condition` is `rule.test`), for `explain-match` traces."""
    match: Mapping[str, Any]
    """The `match` condition as written in the YAML, for `signatures show`."""
    source: Path
    lines: Mapping[str, int]
    """YAML line of the entry (`id`), of `match`, and of each example (`examples.positive.0`), for lint."""
    role: str = "root"
    patterns: tuple[regex.Pattern, ...] = ()
    """Every regex the condition runs (`text` and field `regex`), for lint and the matching-time tests."""
    kinds: frozenset[str] | None = None
    """The only event kinds the condition can hold for (`condition_kinds`), or None for any: `match` tries the
    signature on events of those kinds alone."""


def condition_kinds(spec: Any) -> frozenset[str] | None:
    """The event kinds a YAML condition can hold for, None where it does not say: every key of a condition must
    hold, so its `kind` and an `all` narrow it; an `any` holds for the kinds of each of its branches; `not`,
    `text`, `fields` and `count` say nothing of the kind."""
    if not isinstance(spec, dict):
        return None
    found: frozenset[str] | None = frozenset(map(str, _as_list(spec["kind"]))) if "kind" in spec else None
    for sub in _as_list(spec.get("all") or []):
        if (narrowed := condition_kinds(sub)) is not None:
            found = narrowed if found is None else found & narrowed
    if "any" in spec:
        branches = [condition_kinds(sub) for sub in _as_list(spec["any"])]
        if all(branch is not None for branch in branches):
            either = frozenset().union(*(b for b in branches if b is not None))
            found = either if found is None else found & either
    return found


@dataclass(frozen=True)
class Database:
    """All signatures and causes, in file order."""

    signatures: tuple[Signature, ...]
    causes: Mapping[str, Cause]
    version: str

    @cached_property
    def kind_index(self) -> tuple[Mapping[str, tuple[int, ...]], tuple[int, ...]]:
        """Each event kind's signatures (their places in `signatures`), and the places of those that name no kind:
        a case is tried only against the signatures its events' kinds can match (issue 28: every case went through
        all 252 before)."""
        by_kind: dict[str, list[int]] = {}
        unnamed: list[int] = []
        for place, signature in enumerate(self.signatures):
            if signature.kinds is None:
                unnamed.append(place)
            for kind in signature.kinds or ():
                by_kind.setdefault(kind, []).append(place)
        return {kind: tuple(places) for kind, places in by_kind.items()}, tuple(unnamed)


def default_directory() -> Path:
    """The bundled signatures: inside the installed package, else the repo's top level."""
    packaged = Path(__file__).parent / "signatures"
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / "signatures"


@cache
def load_default() -> Database:
    """The bundled database, loaded once per process."""
    return load(default_directory())


ENTRY_POINT_GROUP = "postmortem.signatures"
"""Installed packages add signature packs here: each entry point names a directory of YAML files
(a str or Path, or a callable returning one)."""


def plugin_directories() -> tuple[list[Path], list[str]]:
    """Directories of installed signature packs, and a warning for each pack that failed to load."""
    found: list[Path] = []
    warnings: list[str] = []
    if not _any_pack_declared():
        return found, warnings
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            value = entry.load()
            folder = Path(value() if callable(value) else value)
            if not folder.is_dir():
                raise NotADirectoryError(str(folder))
            found.append(folder)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is a warning; the rest still loads
            warnings.append(f"signature pack {entry.name!r} not loaded: {type(exc).__name__}: {exc}")
    return found, warnings


def _any_pack_declared() -> bool:
    """Whether any installed distribution's entry_points.txt names our group.

    A quick look (a few small files) before importlib.metadata builds every
    distribution: on start-up, most machines have no pack at all.
    """
    marker = f"[{ENTRY_POINT_GROUP}]"
    for folder in map(Path, sys.path or []):
        for found in (*folder.glob("*.dist-info/entry_points.txt"), *folder.glob("*.egg-info/entry_points.txt")):
            try:
                if marker in found.read_text(encoding="utf-8", errors="replace"):
                    return True
            except OSError:
                continue
    return False


def load(*directories: Path) -> Database:
    """Load and validate every `*.yaml` of each directory, as one database; SignatureError lists every problem.

    Later directories add signatures (and causes) beside earlier ones; an id
    defined twice, in one pack or across packs, is an error naming both files.
    """
    database, flaws = load_checked(*directories)
    if flaws:
        raise SignatureError("\n".join(map(str, flaws)), flaws)
    return database


def load_checked(*directories: Path) -> tuple[Database, list[Flaw]]:
    """The sound entries of every `*.yaml` of each directory, and every problem found on the way (file:line)."""
    files = [path for directory in directories for path in sorted(Path(directory).glob("*.yaml"))]
    if not files:
        raise SignatureError(f"{', '.join(map(str, directories))}: no signature files")
    contents = [path.read_bytes() for path in files]
    if (cached := _cached_documents(files, contents)) is not None:
        documents, lines = cached
        database, flaws = _checked(files, contents, [(document, None, None) for document in documents], lines)
        if not flaws:
            return database, flaws
    read = [_read_yaml(path, content) for path, content in zip(files, contents, strict=True)]
    database, flaws = _checked(files, contents, read)
    if not flaws:
        lines = [[dict(s.lines) for s in database.signatures if s.source == path] for path in files]
        _cache_documents(files, contents, [document for document, _, _ in read], lines)
    return database, flaws


def _checked(files: list[Path], contents: list[bytes], read: list[tuple[dict, yaml.Node | None, Flaw | None]],
             known_lines: list[list[dict[str, int]]] | None = None) -> tuple[Database, list[Flaw]]:
    """The sound entries of the read files and every problem (at its line where the file's node tree is known: a
    database read from the cache is one that had no problem, and its signatures' lines are those it kept)."""
    signatures: list[Signature] = []
    causes: dict[str, Cause] = {}
    flaws: list[Flaw] = []
    for number, (path, (document, node, flaw)) in enumerate(zip(files, read, strict=True)):
        if flaw is not None:
            flaws.append(flaw)
            continue
        for name, entry in (document.get("causes") or {}).items():
            cause = _cause(name, entry)
            if cause is None:
                flaws.append(Flaw(path, _line(node, "causes", name), "",
                                  f"cause {name!r} needs layer, rank and summary"))
            else:
                causes[name] = cause
        for index, entry in enumerate(document.get("signatures") or []):
            lines = known_lines[number][index] if known_lines else None
            signature, problems = _signature(path, index, entry, _child(node, "signatures", index), lines)
            signatures.extend([signature] if signature is not None else [])
            flaws.extend(problems)
    flaws.extend(_check_references(signatures, causes))
    digest = hashlib.sha256(b"".join(contents)).hexdigest()[:12]
    return Database(tuple(signatures), causes, f"{len(signatures)} signatures, {digest}"), flaws


def _cache_key(files: list[Path], contents: list[bytes]) -> str:
    from . import user_cache

    parts = (part for path, content in zip(files, contents, strict=True) for part in (path.name, content))
    return user_cache.key(*parts)


def _cached_documents(files: list[Path], contents: list[bytes]) -> tuple[list[dict], list[list[dict]]] | None:
    """The YAML documents of these exact files as an earlier run parsed them, with the line of each signature's
    parts (JSON in the user cache: parsing the YAML was a tenth of a one-line log's run), or None. What the cache
    holds is checked as any YAML is, and its shape before that."""
    from . import user_cache

    kept = user_cache.read_json("signatures", _cache_key(files, contents))
    if not isinstance(kept, dict):
        return None
    documents, lines = kept.get("documents"), kept.get("lines")
    if not isinstance(documents, list) or not isinstance(lines, list) or not len(documents) == len(lines) == len(files):
        return None
    for document, found in zip(documents, lines, strict=True):
        entries = document.get("signatures") if isinstance(document, dict) else None
        if not isinstance(found, list) or len(found) != len(entries if isinstance(entries, list) else []):
            return None
        if not all(isinstance(at, dict) and all(isinstance(n, int) for n in at.values()) for at in found):
            return None
    return documents, lines


def _cache_documents(files: list[Path], contents: list[bytes], documents: list[dict], lines: list[list[dict]]) -> None:
    from . import user_cache

    user_cache.write_json("signatures", _cache_key(files, contents), {"documents": documents, "lines": lines})


def _read_yaml(path: Path, content: bytes) -> tuple[dict, yaml.Node | None, Flaw | None]:
    """The document and its node tree (the lines of every value) in one parse, or the flaw that stops the file."""
    import yaml  # here only: a database read from the cache needs no YAML (issue 28)

    # the C loader when PyYAML has it (several times faster at start-up); both are safe loaders
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(content.decode("utf-8"))
    try:
        node = loader.get_single_node()
        document = loader.construct_document(node) if node is not None else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        said = ": ".join(filter(None, (getattr(exc, "context", None), getattr(exc, "problem", None)))) or str(exc)
        column = f" (column {mark.column + 1})" if mark else ""
        return {}, None, Flaw(path, mark.line + 1 if mark else 1, "", f"not valid YAML: {said}{column}")
    finally:
        loader.dispose()
    if not isinstance(document or {}, dict):
        return {}, None, Flaw(path, 1, "", "top level must be a mapping")
    return document or {}, node, None


def _child(node: yaml.Node | None, *keys: str | int) -> yaml.Node | None:
    """The node under `node` at mapping keys and sequence indexes `keys`; None where the path ends early (or where
    no node tree was read: a database from the cache)."""
    if node is None:
        return None
    import yaml
    for key in keys:
        if isinstance(node, yaml.MappingNode):
            node = next((value for name, value in node.value if name.value == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            return None
    return node


def _line(node: yaml.Node | None, *keys: str | int) -> int:
    """1-based YAML line of the value at `keys` under `node`, or of the deepest part of that path that exists."""
    for depth in range(len(keys), -1, -1):
        found = _child(node, *keys[:depth])
        if found is not None:
            return found.start_mark.line + 1
    return 1


def _cause(name: str, entry: Any) -> Cause | None:
    if not isinstance(entry, dict) or not {"layer", "rank", "summary"} <= entry.keys():
        return None
    return Cause(name, str(entry["layer"]), int(entry["rank"]), str(entry["summary"]),
                 str(entry.get("reach", "process")))


def _signature(path: Path, index: int, entry: Any, node: yaml.Node | None,
               known_lines: dict[str, int] | None = None) -> tuple[Signature | None, list[Flaw]]:
    """The compiled entry, or None and every problem it has (each at its own line). `known_lines`: the lines of its
    parts when no node tree was read (a database from the cache)."""
    ident = str(entry.get("id", f"entry {index}")) if isinstance(entry, dict) else f"entry {index}"
    flaws: list[Flaw] = []

    def flaw(message: str, *keys: str | int) -> None:
        flaws.append(Flaw(path, _line(node, *keys), ident, message))

    if not isinstance(entry, dict):
        flaw("must be a mapping")
        return None, flaws
    missing = [key for key in REQUIRED if key not in entry]
    if missing:
        flaw(f"missing {', '.join(missing)}")
    for key in entry:
        if key not in REQUIRED + OPTIONAL:
            flaw(f"unknown key {key!r} (known: {', '.join(REQUIRED + OPTIONAL)})", key)
    if "severity" in entry and entry["severity"] not in SEVERITIES:
        flaw(f"severity {entry['severity']!r} must be one of {', '.join(SEVERITIES)}", "severity")
    confidence = entry.get("confidence", 1)
    if not isinstance(confidence, (int, float)) or not 0 < confidence <= 1:
        flaw(f"confidence {confidence!r} must be a number in (0, 1]", "confidence")
    examples = entry.get("examples") or {}
    if not isinstance(examples, dict) or not examples.get("positive") or not examples.get("negative"):
        flaw("needs examples.positive and examples.negative", "examples")
        examples = {}
    role = entry.get("role", "root")
    if role not in ROLES:
        flaw(f"role {role!r} must be one of {', '.join(ROLES)}", "role")
    patterns: list[regex.Pattern] = []
    rule = None
    if "match" in entry:
        try:
            rule = compile_rule(entry["match"], patterns, lazy=known_lines is not None)
        except (SignatureError, TypeError, ValueError) as exc:
            flaw(f"bad match: {exc}", "match")
    parsed: dict[str, list[str | Mapping[str, str]]] = {"positive": [], "negative": []}
    for kind in ("positive", "negative"):
        for i, value in enumerate(examples.get(kind) or ()):
            example = _example(value)
            if example is None:
                flaw("an example is text, {file: path}, {issue: path} or {prose: text}", "examples", kind, i)
            else:
                parsed[kind].append(example)
    if flaws or rule is None:
        return None, flaws
    lines = known_lines or {"id": _line(node), "match": _line(node, "match")}
    if known_lines is None:
        lines.update({f"examples.{kind}.{i}": _line(node, "examples", kind, i)
                      for kind in ("positive", "negative") for i in range(len(parsed[kind]))})
    return Signature(
        id=ident,
        title=str(entry["title"]),
        cause=str(entry["cause"]),
        severity=entry["severity"],
        confidence=float(confidence),
        explain=str(entry["explain"]).strip(),
        actions=tuple(str(a) for a in entry["actions"]),
        references=tuple(str(r) for r in entry.get("references") or ()),
        examples={kind: tuple(parsed[kind]) for kind in ("positive", "negative")},
        condition=rule.test,
        origin=f"{path}:{lines['id']}",
        rule=rule,
        match=entry["match"],
        source=path,
        lines=lines,
        role=role,
        patterns=tuple(patterns),
        kinds=condition_kinds(entry["match"]),
    ), []


EXAMPLE_KEYS = frozenset({"file", "issue", "prose"})
"""What a mapping example names: a file, an issue (read as triage reads it), or text a person wrote (lint.py)."""


def _example(value: Any) -> str | Mapping[str, str] | None:
    if isinstance(value, dict):
        return {key: str(value[key]) for key in value} if len(value) == 1 and set(value) <= EXAMPLE_KEYS else None
    return str(value)


def _check_references(signatures: Sequence[Signature], causes: Mapping[str, Cause]) -> list[Flaw]:
    flaws = []
    seen: dict[str, str] = {}
    for signature in signatures:
        where = Path(signature.source), signature.lines["id"], signature.id
        if signature.id in seen:
            flaws.append(Flaw(*where, f"duplicate id {signature.id!r} (first in {seen[signature.id]})"))
        seen.setdefault(signature.id, signature.origin)
        if signature.cause not in causes:
            flaws.append(Flaw(*where, f"cause {signature.cause!r} is not in the cause vocabulary"))
    return flaws


def _nothing(_: Event) -> str:
    return ""


@dataclass(frozen=True)
class Rule:
    """One part of a signature's condition, compiled: the test matching runs, and what a trace says about it."""

    test: Condition
    label: str
    """What the part asks, in the YAML's terms: `kind is xid`, `field xid is 79`, `text matches /.../`."""
    seen: Callable[[Event], str] = _nothing
    """What an event offers the part (the field's value, the text searched): the trace's 'why'."""
    parts: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class Step:
    """One line of a match trace: a part of the condition, whether it held on the event, and why."""

    depth: int
    held: bool
    label: str
    seen: str


def trace(rule: Rule, event: Event, depth: int = 0) -> list[Step]:
    """Every part of `rule` tried on `event`, outermost first, with the same tests matching runs."""
    steps = [Step(depth, rule.test(event), rule.label, rule.seen(event))]
    for part in rule.parts:
        steps.extend(trace(part, event, depth + 1))
    return steps


def compile_condition(spec: Any, patterns: list[regex.Pattern] | None = None) -> Condition:
    """Turn a YAML condition into a predicate over events; each regex compiled is added to `patterns`."""
    return compile_rule(spec, patterns).test


def compile_rule(spec: Any, patterns: list[regex.Pattern] | None = None, lazy: bool = False) -> Rule:
    """A YAML condition as a tree of rules; every key present must hold. Each regex compiled is added to `patterns`.

    `lazy`: each regex is compiled when first matched (later.compile), for a database read back from the user cache,
    whose every pattern compiled when it was written there: a run compiles only the patterns of the signatures whose
    event kinds it met (a log with no known line, none of them)."""
    patterns = [] if patterns is None else patterns
    if not isinstance(spec, dict) or not spec:
        raise SignatureError(f"a condition must be a non-empty mapping, got {spec!r}")
    parts: list[Rule] = []
    for key, value in spec.items():
        if key == "kind":
            kinds = frozenset(_as_list(value))
            parts.append(Rule(partial(_kind_in, kinds), f"kind is {' or '.join(sorted(kinds))}", _kind_seen))
        elif key == "text":
            pattern = _pattern(value, lazy)
            patterns.append(pattern)
            parts.append(Rule(partial(_text_has, pattern), f"text matches /{value}/", partial(_text_seen, pattern)))
        elif key == "fields":
            if not isinstance(value, dict):
                raise SignatureError("fields must be a mapping")
            parts.extend(_field_rule(name, expected, patterns, lazy) for name, expected in value.items())
        elif key in ("any", "all"):
            subs = tuple(compile_rule(sub, patterns, lazy) for sub in _as_list(value))
            parts.append(Rule(partial(_any if key == "any" else _all, [sub.test for sub in subs]), f"{key} of",
                              parts=subs))
        elif key == "not":
            sub = compile_rule(value, patterns, lazy)
            parts.append(Rule(partial(_not, sub.test), "not", parts=(sub,)))
        elif key == "count":
            parts.append(_count_rule(value))
        else:
            raise SignatureError(f"unknown condition key {key!r}")
    if len(parts) == 1:
        return parts[0]
    return Rule(partial(_all, [part.test for part in parts]), "all of", parts=tuple(parts))


def _pattern(source: Any, lazy: bool) -> regex.Pattern:
    if not isinstance(source, str):
        raise SignatureError(f"a pattern must be text, got {source!r}")
    if lazy:
        return later.compile(source)
    import regex

    try:
        return regex.compile(source)
    except regex.error as exc:
        raise SignatureError(f"{exc} in /{source}/") from exc


def _kind_in(kinds: frozenset[str], e: Event) -> bool:
    return e.kind in kinds


def _kind_seen(e: Event) -> str:
    return f"the event's kind is {e.kind}"


def _text_has(pattern: regex.Pattern, e: Event) -> bool:
    return pattern.search(e.text, 0, MATCH_WINDOW) is not None


def _text_seen(pattern: regex.Pattern, e: Event) -> str:
    return f"text: {_searched(pattern, e.text)}"


def _any(tests: list[Condition], e: Event) -> bool:
    return any(test(e) for test in tests)


def _all(tests: list[Condition], e: Event) -> bool:
    return all(test(e) for test in tests)


def _not(test: Condition, e: Event) -> bool:
    return not test(e)


_SHOWN = 160
"""Characters of a text or field value a trace quotes."""


def _searched(pattern: regex.Pattern, text: str) -> str:
    """What a regex found in `text`, or the part it searched (only the first MATCH_WINDOW characters)."""
    found = pattern.search(text, 0, MATCH_WINDOW)
    if found is not None:
        return f"found {found.group()!r}"
    window = f"; only its first {MATCH_WINDOW} of {len(text)} characters are read" if len(text) > MATCH_WINDOW else ""
    return f"not in {_quoted(text)}{window}"


def _quoted(value: Any) -> str:
    if not isinstance(value, str):
        return repr(value)
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")


def _field_seen(name: str, pattern: regex.Pattern | None = None) -> Callable[[Event], str]:
    """A field's value as the event has it (what a regex found in it), or that the event has no such field."""

    def seen(e: Event) -> str:
        if name not in e.fields:
            return f"the event has no field {name} (it has: {', '.join(sorted(e.fields)) or 'none'})"
        value = e.fields[name]
        return f"{name}: {_searched(pattern, str(value))}" if pattern is not None else f"{name} = {_quoted(value)}"

    return seen


def _field_rule(name: str, expected: Any, patterns: list[regex.Pattern], lazy: bool = False) -> Rule:
    if isinstance(expected, dict):
        if len(expected) != 1:
            raise SignatureError(f"field {name}: one operator per field")
        (op, operand), = expected.items()
        if op == "regex":
            pattern = _pattern(operand, lazy)
            patterns.append(pattern)
            return Rule(lambda e: name in e.fields and pattern.search(str(e.fields[name]), 0, MATCH_WINDOW) is not None,
                        f"field {name} matches /{operand}/", _field_seen(name, pattern))
        if op in ("gte", "lte"):
            bound = float(operand)
            sign = 1 if op == "gte" else -1
            return Rule(lambda e: (number := _number(e.fields.get(name))) is not None and sign * (number - bound) >= 0,
                        f"field {name} {'>=' if op == 'gte' else '<='} {operand}", _field_seen(name))
        if op == "exists":
            return Rule(lambda e: (name in e.fields and e.fields[name] is not None) == bool(operand),
                        f"field {name} {'is present' if operand else 'is absent'}", _field_seen(name))
        if op == "version":
            return Rule(_version_test(name, str(operand)), f"field {name} version {operand}", _field_seen(name))
        raise SignatureError(f"field {name}: unknown operator {op!r}")
    values = _as_list(expected)
    allowed = frozenset(_normal(v) for v in values)
    return Rule(lambda e: name in e.fields and _normal(e.fields[name]) in allowed,
                f"field {name} is {' or '.join(map(str, values))}", _field_seen(name))


def _count_rule(bounds: Any) -> Rule:
    """The event's count (folded repeats) within {gte: N} / {lte: N}."""
    if not isinstance(bounds, dict) or not bounds or not set(bounds) <= {"gte", "lte"}:
        raise SignatureError(f"count must be a mapping with gte and/or lte, got {bounds!r}")
    low, high = float(bounds.get("gte", float("-inf"))), float(bounds.get("lte", float("inf")))
    label = " and ".join(f"{'>=' if op == 'gte' else '<='} {bounds[op]}" for op in ("gte", "lte") if op in bounds)
    return Rule(lambda e: low <= e.count <= high, f"count {label}", lambda e: f"the event's count is {e.count}")


_COMPARE: dict[str, Callable[[tuple, tuple], bool]] = {
    ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
}


_VERSION = later.compile(r"\d+(?:\.\d+)*")


def _version_key(text: Any) -> tuple[int, ...] | None:
    parts = _VERSION.match(str(text).strip())
    return tuple(int(p) for p in parts.group().split(".")) if parts else None


def _bound(part: str) -> tuple[str, tuple[int, ...]] | None:
    """`>= 525.105` as its operator and its version (read when a signature is loaded, without a pattern, so that
    loading the database compiles none); None where it is not one."""
    text = part.strip()
    operator = next((op for op in (">=", "<=", "==", ">", "<") if text.startswith(op)), None)
    pieces = text[len(operator):].strip().split(".") if operator else []
    if not pieces or not all(piece.isascii() and piece.isdigit() for piece in pieces):
        return None
    assert operator is not None
    return operator, tuple(int(piece) for piece in pieces)


def _version_test(name: str, spec: str) -> Condition:
    """`{version: ">=525, <525.105.17"}`: every comma-separated bound holds for the dotted number in the field."""
    bounds = []
    for part in spec.split(","):
        found = _bound(part)
        if found is None:
            raise SignatureError(f"field {name}: bad version bound {part!r}")
        operator, key = found
        bounds.append((_COMPARE[operator], key))

    def test(event: Event) -> bool:
        value = _version_key(event.fields.get(name)) if event.fields.get(name) is not None else None
        return value is not None and all(compare(value, bound) for compare, bound in bounds)

    return test


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _normal(value: Any) -> str:
    """Compare YAML scalars and event fields loosely: 79, "79" and 79.0 are equal."""
    number = _number(value)
    if number is not None and float(number).is_integer():
        return str(int(number))
    return str(value).lower() if isinstance(value, str) else str(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except (TypeError, ValueError):
        return None


class _Blank(dict):
    """Format fields where an unknown name reads as nothing rather than failing the whole explanation."""

    def __missing__(self, key: str) -> str:
        return ""


_OPTIONAL = later.plain(r"\[\[((?:(?!\[\[|\]\]).)*)\]\]", later.DOTALL)
"""An innermost `[[...]]` part of a template."""


def render_explanation(template: str, fields: Mapping[str, Any]) -> str:
    """Fill `{field}` placeholders from the first evidence event, leaving out `[[...]]` parts it cannot fill.

    Parts are resolved innermost first, so an outer part survives when only an inner one is dropped.
    """
    try:
        return string.Formatter().vformat(_resolve(template, fields), (), _Blank(fields))
    except (ValueError, IndexError, KeyError, AttributeError):
        return template


def bare_placeholders(template: str) -> list[str]:
    """The placeholders outside every `[[...]]` part: each one reads as nothing when its field is absent."""
    try:
        return _names(_resolve(template, {}))
    except ValueError:
        return []


def _resolve(template: str, fields: Mapping[str, Any]) -> str:
    """The template with each `[[...]]` part kept (brackets removed) or dropped, innermost first."""
    while (resolved := _OPTIONAL.sub(lambda m: m.group(1) if _known(m.group(1), fields) else "",
                                     template)) != template:
        template = resolved
    return template


def _names(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def _known(template: str, fields: Mapping[str, Any]) -> bool:
    return all(fields.get(name) not in (None, "", [], ()) for name in _names(template))


def match(database: Database, events: Iterable[Event]) -> list[Finding]:
    """One Finding per signature that matched, with every matching event as evidence."""
    events = list(events)
    by_kind: dict[str, list[int]] = {}
    for at, event in enumerate(events):
        by_kind.setdefault(event.kind, []).append(at)
    chosen: dict[frozenset[str], list[Event]] = {}  # signatures share kind sets: each set's events gathered once
    findings: list[Finding] = []
    index, unnamed = database.kind_index
    places = sorted({*unnamed, *(place for kind in by_kind for place in index.get(kind, ()))})  # in file order
    for signature in (database.signatures[place] for place in places):
        tried = events
        if signature.kinds is not None:
            if signature.kinds not in chosen:
                chosen[signature.kinds] = _of_kinds(events, by_kind, signature.kinds)
            tried = chosen[signature.kinds]
        hits = [e for e in tried if signature.condition(e)]
        if not hits:
            continue
        findings.append(finding_for(signature, hits))
    return findings


def _of_kinds(events: list[Event], by_kind: Mapping[str, list[int]], kinds: frozenset[str]) -> list[Event]:
    """The events of these kinds, in the order they were given (`by_kind`: each kind's places in `events`)."""
    places = [at for kind in kinds for at in by_kind.get(kind, ())]
    return [events[at] for at in (places if len(kinds) < 2 else sorted(places))]


def finding_for(signature: Signature, hits: Sequence[Event]) -> Finding:
    """The Finding of `signature` proven by `hits` (confidence settled later by ranking). Where its format's own
    reader read the fact, loose mentions of it (sources.mentions: prose, notes, a summary) are no further evidence:
    they would count it twice and carry fewer fields (no bus id, no pid)."""
    hits = [e for e in hits if e.fields.get("read") != LOOSE] or list(hits)
    occurrences = sum(e.count for e in hits)
    places = len({e.where.path for e in hits})
    reason = f"{occurrences} matching event{'s' * (occurrences != 1)} in {places} input{'s' * (places != 1)}"
    confidence = signature.confidence
    if hits[0].fields.get("read") == LOOSE:
        confidence = round(confidence * LOOSE_FACTOR, 2)
        reason += "; read loosely: the code or phrase stands outside the layout of the program that writes it"
    times = sorted((t for e in hits for t in (e.time, e.fields.get("last_time")) if isinstance(t, datetime)),
                   key=moment)
    return Finding(
        signature=signature.id,
        cause=signature.cause,
        severity=signature.severity,
        confidence=confidence,
        confidence_reason=reason,
        title=signature.title,
        explanation=render_explanation(signature.explain, hits[0].fields),
        actions=signature.actions,
        evidence=tuple(e.id for e in hits),
        references=signature.references,
        role=signature.role,
        count=occurrences,
        first_seen=times[0].isoformat() if times else written_span(hits)[0],
        last_seen=times[-1].isoformat() if times else written_span(hits)[1],
    )


def moment(value: datetime) -> float:
    """Seconds for ordering times; naive times (logs without a zone) are read as UTC."""
    return value.replace(tzinfo=UTC).timestamp() if value.tzinfo is None else value.timestamp()
