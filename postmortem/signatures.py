"""The signature database: YAML entries that turn events into findings.

Each `signatures/*.yaml` file holds `signatures:` (a list of entries) and may
hold `causes:` (the cause vocabulary with its layer and rank). Loading checks
every entry and fails with the file and entry at fault; conditions are
compiled once, so matching is a walk over events with no re-parsing.

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
(`[[{gpu_model} is {sm} ({family}); ]]`); such parts may nest.
"""

from __future__ import annotations

import hashlib
import string
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import regex
import yaml

from .model import SEVERITIES, Event, Finding

Condition = Callable[[Event], bool]

REQUIRED = ("id", "title", "cause", "severity", "confidence", "match", "explain", "actions")
OPTIONAL = ("references", "examples", "notes", "role")
ROLES = ("root", "consequence")
"""`consequence`: the signature matches a report that by definition summarises an earlier failure
(Xid 154, "reset required", a failed probe); it never stands as the root while a root is known."""


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""The C loader when PyYAML has it (several times faster at start-up); both are safe loaders."""


MATCH_WINDOW = 64 * 1024
"""Most characters of an event's text, or of one field, that a signature's regex reads (from the start).

Every line reaches us cut to text.MAX_LINE around its anchor, and the patterns are linear
(tests/test_regex_time.py), but an event may fold a long block (a traceback, a dump); its
report's words sit in its first lines. 64 Ki is eight full lines: more than any rule needs,
and a bound on what one rule costs per event whatever the input.
"""


class SignatureError(Exception):
    """A signature file or entry is invalid; the message names file and entry."""


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
    role: str = "root"
    patterns: tuple[regex.Pattern, ...] = ()
    """Every regex the condition runs (`text` and field `regex`), for lint and the matching-time tests."""


@dataclass(frozen=True)
class Database:
    """All signatures and causes, in file order."""

    signatures: tuple[Signature, ...]
    causes: Mapping[str, Cause]
    version: str


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
    """Load and validate every `*.yaml` of each directory, as one database.

    Later directories add signatures (and causes) beside earlier ones; an id
    defined twice, in one pack or across packs, is an error naming both files.
    """
    signatures: list[Signature] = []
    causes: dict[str, Cause] = {}
    files = [path for directory in directories for path in sorted(Path(directory).glob("*.yaml"))]
    if not files:
        raise SignatureError(f"{', '.join(map(str, directories))}: no signature files")
    for path in files:
        try:
            document = yaml.load(path.read_text(encoding="utf-8"), Loader=_YAML_LOADER) or {}
        except yaml.YAMLError as exc:
            raise SignatureError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(document, dict):
            raise SignatureError(f"{path}: top level must be a mapping")
        for name, entry in (document.get("causes") or {}).items():
            causes[name] = _cause(path, name, entry)
        for index, entry in enumerate(document.get("signatures") or []):
            signatures.append(_signature(path, index, entry))
    _check_references(signatures, causes)
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in files)).hexdigest()[:12]
    return Database(tuple(signatures), causes, f"{len(signatures)} signatures, {digest}")


def _cause(path: Path, name: str, entry: Any) -> Cause:
    if not isinstance(entry, dict) or not {"layer", "rank", "summary"} <= entry.keys():
        raise SignatureError(f"{path}: cause {name!r} needs layer, rank and summary")
    return Cause(name, str(entry["layer"]), int(entry["rank"]), str(entry["summary"]))


def _signature(path: Path, index: int, entry: Any) -> Signature:
    label = f"{path}: entry {index}" + (f" ({entry.get('id')})" if isinstance(entry, dict) else "")
    if not isinstance(entry, dict):
        raise SignatureError(f"{label}: must be a mapping")
    missing = [key for key in REQUIRED if key not in entry]
    unknown = [key for key in entry if key not in REQUIRED + OPTIONAL]
    if missing or unknown:
        raise SignatureError(f"{label}: missing {missing} unknown {unknown}")
    if entry["severity"] not in SEVERITIES:
        raise SignatureError(f"{label}: severity must be one of {SEVERITIES}")
    confidence = entry["confidence"]
    if not isinstance(confidence, (int, float)) or not 0 < confidence <= 1:
        raise SignatureError(f"{label}: confidence must be a number in (0, 1]")
    examples = entry.get("examples") or {}
    if not isinstance(examples, dict) or not examples.get("positive") or not examples.get("negative"):
        raise SignatureError(f"{label}: needs examples.positive and examples.negative")
    role = entry.get("role", "root")
    if role not in ROLES:
        raise SignatureError(f"{label}: role must be one of {ROLES}")
    patterns: list[regex.Pattern] = []
    try:
        condition = compile_condition(entry["match"], patterns)
    except (SignatureError, regex.error, TypeError, ValueError) as exc:
        raise SignatureError(f"{label}: bad match: {exc}") from exc
    return Signature(
        id=str(entry["id"]),
        title=str(entry["title"]),
        cause=str(entry["cause"]),
        severity=entry["severity"],
        confidence=float(confidence),
        explain=str(entry["explain"]).strip(),
        actions=tuple(str(a) for a in entry["actions"]),
        references=tuple(str(r) for r in entry.get("references") or ()),
        examples={k: tuple(_example(label, v) for v in examples.get(k) or ()) for k in ("positive", "negative")},
        condition=condition,
        origin=label,
        role=role,
        patterns=tuple(patterns),
    )


def _example(label: str, value: Any) -> str | Mapping[str, str]:
    if isinstance(value, dict):
        if set(value) != {"file"}:
            raise SignatureError(f"{label}: an example is text or {{file: path}}")
        return {"file": str(value["file"])}
    return str(value)


def _check_references(signatures: Sequence[Signature], causes: Mapping[str, Cause]) -> None:
    seen: dict[str, str] = {}
    for signature in signatures:
        if signature.id in seen:
            raise SignatureError(f"{signature.origin}: duplicate id {signature.id!r} (first in {seen[signature.id]})")
        seen[signature.id] = signature.origin
        if signature.cause not in causes:
            raise SignatureError(f"{signature.origin}: cause {signature.cause!r} is not in the cause vocabulary")


def compile_condition(spec: Any, patterns: list[regex.Pattern] | None = None) -> Condition:
    """Turn a YAML condition into a predicate over events; each regex compiled is added to `patterns`."""
    patterns = [] if patterns is None else patterns
    if not isinstance(spec, dict) or not spec:
        raise SignatureError(f"a condition must be a non-empty mapping, got {spec!r}")
    parts: list[Condition] = []
    for key, value in spec.items():
        if key == "kind":
            kinds = frozenset(_as_list(value))

            def kind_in(e: Event, kinds: frozenset = kinds) -> bool:
                return e.kind in kinds

            parts.append(kind_in)
        elif key == "text":
            pattern = regex.compile(value)
            patterns.append(pattern)

            def text_has(e: Event, p: regex.Pattern = pattern) -> bool:
                return p.search(e.text, 0, MATCH_WINDOW) is not None

            parts.append(text_has)
        elif key == "fields":
            if not isinstance(value, dict):
                raise SignatureError("fields must be a mapping")
            parts.extend(_field_test(name, expected, patterns) for name, expected in value.items())
        elif key in ("any", "all"):
            subs = [compile_condition(sub, patterns) for sub in _as_list(value)]
            test = any if key == "any" else all

            def combined(e: Event, subs: list[Condition] = subs, test: Callable[[Iterable[bool]], bool] = test) -> bool:
                return test(sub(e) for sub in subs)

            parts.append(combined)
        elif key == "not":
            sub = compile_condition(value, patterns)

            def negated(e: Event, sub: Condition = sub) -> bool:
                return not sub(e)

            parts.append(negated)
        elif key == "count":
            parts.append(_count_test(value))
        else:
            raise SignatureError(f"unknown condition key {key!r}")
    return lambda e: all(part(e) for part in parts)


def _field_test(name: str, expected: Any, patterns: list[regex.Pattern]) -> Condition:
    if isinstance(expected, dict):
        if len(expected) != 1:
            raise SignatureError(f"field {name}: one operator per field")
        (op, operand), = expected.items()
        if op == "regex":
            pattern = regex.compile(operand)
            patterns.append(pattern)
            return lambda e: name in e.fields and pattern.search(str(e.fields[name]), 0, MATCH_WINDOW) is not None
        if op in ("gte", "lte"):
            bound = float(operand)
            sign = 1 if op == "gte" else -1
            return lambda e: (number := _number(e.fields.get(name))) is not None and sign * (number - bound) >= 0
        if op == "exists":
            return lambda e: (name in e.fields and e.fields[name] is not None) == bool(operand)
        if op == "version":
            return _version_test(name, str(operand))
        raise SignatureError(f"field {name}: unknown operator {op!r}")
    allowed = frozenset(_normal(v) for v in _as_list(expected))
    return lambda e: name in e.fields and _normal(e.fields[name]) in allowed


def _count_test(bounds: Any) -> Condition:
    """The event's count (folded repeats) within {gte: N} / {lte: N}."""
    if not isinstance(bounds, dict) or not bounds or not set(bounds) <= {"gte", "lte"}:
        raise SignatureError(f"count must be a mapping with gte and/or lte, got {bounds!r}")
    low, high = float(bounds.get("gte", float("-inf"))), float(bounds.get("lte", float("inf")))
    return lambda e: low <= e.count <= high


_CONSTRAINT = regex.compile(r"^\s*(>=|<=|>|<|==)\s*(\d+(?:\.\d+)*)\s*$")
_COMPARE: dict[str, Callable[[tuple, tuple], bool]] = {
    ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
}


def _version_key(text: Any) -> tuple[int, ...] | None:
    parts = regex.match(r"\d+(?:\.\d+)*", str(text).strip())
    return tuple(int(p) for p in parts.group().split(".")) if parts else None


def _version_test(name: str, spec: str) -> Condition:
    """`{version: ">=525, <525.105.17"}`: every comma-separated bound holds for the dotted number in the field."""
    bounds = []
    for part in spec.split(","):
        found = _CONSTRAINT.match(part)
        if not found:
            raise SignatureError(f"field {name}: bad version bound {part!r}")
        key = _version_key(found[2])
        assert key is not None  # _CONSTRAINT matched a dotted number
        bounds.append((_COMPARE[found[1]], key))

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
    def __init__(self, fields: Mapping[str, Any], missing: Callable[[str], str]):
        super().__init__(fields)
        self.missing = missing

    def __missing__(self, key: str) -> str:
        return self.missing(key)


_OPTIONAL = regex.compile(r"\[\[((?:(?!\[\[|\]\]).)*)\]\]", regex.DOTALL)
"""An innermost `[[...]]` part of a template."""


def render_explanation(template: str, fields: Mapping[str, Any], missing: Callable[[str], str] = lambda _: "?") -> str:
    """Fill `{field}` placeholders from the first evidence event; unknown ones show `missing(name)` ('?').

    `[[...]]` parts whose placeholders are not all known are left out (innermost first).
    """
    try:
        while (resolved := _OPTIONAL.sub(lambda m: m.group(1) if _known(m.group(1), fields) else "",
                                         template)) != template:
            template = resolved
        return string.Formatter().vformat(template, (), _Blank(fields, missing))
    except (ValueError, IndexError, KeyError, AttributeError):
        return template


def _known(template: str, fields: Mapping[str, Any]) -> bool:
    names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    return all(fields.get(name) not in (None, "", [], ()) for name in names)


def match(database: Database, events: Iterable[Event]) -> list[Finding]:
    """One Finding per signature that matched, with every matching event as evidence."""
    events = list(events)
    findings: list[Finding] = []
    for signature in database.signatures:
        hits = [e for e in events if signature.condition(e)]
        if not hits:
            continue
        findings.append(finding_for(signature, hits))
    return findings


def finding_for(signature: Signature, hits: Sequence[Event]) -> Finding:
    """The Finding of `signature` proven by `hits` (confidence settled later by ranking)."""
    occurrences = sum(e.count for e in hits)
    places = len({e.where.path for e in hits})
    reason = f"{occurrences} matching event{'s' * (occurrences != 1)} in {places} input{'s' * (places != 1)}"
    times = sorted((t for e in hits for t in (e.time, e.fields.get("last_time")) if isinstance(t, datetime)),
                   key=moment)
    return Finding(
        signature=signature.id,
        cause=signature.cause,
        severity=signature.severity,
        confidence=signature.confidence,
        confidence_reason=reason,
        title=signature.title,
        explanation=render_explanation(signature.explain, hits[0].fields),
        actions=signature.actions,
        evidence=tuple(e.id for e in hits),
        references=signature.references,
        role=signature.role,
        count=occurrences,
        first_seen=times[0].isoformat() if times else None,
        last_seen=times[-1].isoformat() if times else None,
    )


def moment(value: datetime) -> float:
    """Seconds for ordering times; naive times (logs without a zone) are read as UTC."""
    return value.replace(tzinfo=UTC).timestamp() if value.tzinfo is None else value.timestamp()
