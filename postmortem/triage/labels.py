"""Labels from a configurable map (triage/labels.yaml, or a project's own): cause, layer, severity, needs-info,
duplicate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..model import Report

MAX_LABEL = 50
"""GitHub's longest label name."""


class LabelMapError(ValueError):
    """A label map that is not of the documented shape (the message says where)."""


@dataclass(frozen=True)
class LabelMap:
    """Which label each outcome gets; None or a missing key gives none."""

    cause: str | None = None
    causes: dict[str, str] = field(default_factory=dict)
    layers: dict[str, str] = field(default_factory=dict)
    severities: dict[str, str] = field(default_factory=dict)
    needs_info: str | None = None
    duplicate: str | None = None
    unknown: str | None = None


def load_label_map(path: str | Path | None = None) -> LabelMap:
    """The map at `path`, or the bundled default."""
    text = (Path(path).read_text(encoding="utf-8") if path is not None
            else resources.files(__package__).joinpath("labels.yaml").read_text(encoding="utf-8"))
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise LabelMapError(f"{path}: not YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise LabelMapError(f"{path}: a label map is a mapping (cause, causes, layers, ...)")
    known = set(LabelMap.__dataclass_fields__)
    if unknown := sorted(set(data) - known):
        raise LabelMapError(f"{path}: unknown key(s) {', '.join(map(str, unknown))}; known: {', '.join(sorted(known))}")
    return LabelMap(**{name: _checked(path, name, value) for name, value in data.items()})


def _checked(path: Any, name: str, value: Any) -> Any:
    if name in ("causes", "layers", "severities"):
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise LabelMapError(f"{path}: {name} maps names to label strings")
        return {str(k): v for k, v in value.items()}
    if value is not None and not isinstance(value, str):
        raise LabelMapError(f"{path}: {name} is a label string")
    return value


def labels_for(report: Report, requests: Sequence[object], label_map: LabelMap | None = None,
               duplicates: bool = False) -> tuple[str, ...]:
    """The labels of one triaged issue, in the map's order, each at most MAX_LABEL characters."""
    from ..signatures import load_default

    chosen = label_map or load_label_map()
    verdict = report.verdict
    found: list[str | None] = []
    if verdict is None:
        found.append(chosen.unknown)
    else:
        cause = load_default().causes.get(verdict.cause)
        named = chosen.causes.get(verdict.cause) or chosen.cause
        found += [named.replace("{cause}", verdict.cause) if named else None,
                  chosen.layers.get(cause.layer) if cause else None, chosen.severities.get(verdict.severity)]
    found += [chosen.needs_info if requests else None, chosen.duplicate if duplicates else None]
    return tuple(dict.fromkeys(label[:MAX_LABEL] for label in found if label))

