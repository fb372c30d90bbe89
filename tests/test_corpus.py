"""The corpora of real cases: ../shared/corpus (given) and tests/corpus (harvested from public threads).

Each case is a directory of artifacts and a case.yaml labelled from what its thread established
(`expected_causes`, first = the root; `must_mention`: strings a correct analysis surfaces). This is
the scoring of ../shared/tools/score_corpus.py, run in-process: every case must be analysed without
a crash, the share of right verdicts may not fall below what the closing note of the last change
measured (raise the floors when recognition improves; never lower them to pass), and no harvested case
outside tests/corpus/MISSES.yaml (the known misses, each with why) may be missed.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
import yaml

from postmortem.pipeline import analyze
from postmortem.render.json_report import as_dict
from shared_checkout import SHARED, needs

HERE = Path(__file__).parent
CORPORA = {"shared": SHARED / "corpus" / "cases", "harvested": HERE / "corpus"}
TOP1_FLOOR = {"shared": 1.0, "harvested": 0.969}
MENTION_FLOOR = {"shared": 1.0, "harvested": 0.89}
KNOWN_MISSES = yaml.safe_load((HERE / "corpus" / "MISSES.yaml").read_text(encoding="utf-8"))
"""Harvested cases missed today, each with why (tests/corpus/MISSES.yaml): any other miss is a regression."""


def _cases(corpus: str) -> list[Path]:
    root = CORPORA[corpus]
    return sorted(p.parent for p in root.rglob("case.yaml")) if root.is_dir() else []


@cache
def _score(case_dir: Path) -> tuple[bool, int, int]:
    case = yaml.safe_load((case_dir / "case.yaml").read_text(encoding="utf-8")) or {}
    artifacts = sorted(str(p) for p in case_dir.iterdir() if p.is_file() and p.name != "case.yaml")
    out = as_dict(analyze(artifacts))
    causes = [f["cause"] for f in out["findings"]] or ["unknown"]
    blob = json.dumps(out, ensure_ascii=False)
    must = [str(m) for m in case.get("must_mention") or []]
    return causes[0] in [str(c) for c in case["expected_causes"]], sum(m in blob for m in must), len(must)


HELD_OUT = HERE / "heldout"
"""Rounds scored at first sight and not yet guarded (tests/heldout/README.md): only their labels are checked."""


def test_harvested_cases_are_labelled_from_their_thread():
    """Every harvested case, held out or not, names its public source, uses the cause vocabulary, and its
    must-mention strings are in its artifacts; no thread is used twice."""
    causes = set(yaml.safe_load((HERE.parent / "signatures" / "causes.yaml").read_text())["causes"])
    cases = _cases("harvested")
    assert len(cases) >= 390
    held_out = sorted(p.parent for p in HELD_OUT.rglob("case.yaml"))
    assert len(held_out) >= 39
    sources = [str(yaml.safe_load((c / "case.yaml").read_text(encoding="utf-8"))["source"]) for c in held_out]
    assert len(set(sources)) == len(sources)
    for case_dir in cases + held_out:
        case = yaml.safe_load((case_dir / "case.yaml").read_text(encoding="utf-8"))
        assert str(case["source"]).startswith("https://"), case_dir.name
        assert set(case["expected_causes"]) <= causes, case_dir.name
        text = "".join(p.read_text(encoding="utf-8", errors="replace") for p in case_dir.iterdir()
                       if p.name != "case.yaml")
        assert all(str(m) in text for m in case.get("must_mention") or []), case_dir.name


@pytest.mark.parametrize("corpus", ["harvested", pytest.param("shared", marks=needs(CORPORA["shared"]))])
def test_corpus_verdicts(corpus):
    cases = _cases(corpus)
    if not cases:
        pytest.skip(f"{CORPORA[corpus]} is not here")
    scores = [_score(c) for c in cases]
    top1 = sum(hit for hit, _, _ in scores) / len(scores)
    mentioned = sum(found for _, found, _ in scores) / max(1, sum(total for _, _, total in scores))
    misses = [c.name for c, (hit, _, _) in zip(cases, scores) if not hit]
    assert top1 >= TOP1_FLOOR[corpus], f"top-1 {top1:.3f} < {TOP1_FLOOR[corpus]}; misses: {misses}"
    assert mentioned >= MENTION_FLOOR[corpus]
    if corpus == "harvested":
        assert set(misses) <= set(KNOWN_MISSES), f"regressions: {sorted(set(misses) - set(KNOWN_MISSES))}"
        assert set(KNOWN_MISSES) <= set(misses), f"now right, take off MISSES.yaml: {set(KNOWN_MISSES) - set(misses)}"
