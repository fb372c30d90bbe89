"""Every crafted hostile input (tests/hostile/cases_*.py) run through the real command line, bounded."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import hostile
from hostile.harness import Hostile, run_case


def all_cases() -> list[Hostile]:
    cases: list[Hostile] = []
    for info in pkgutil.iter_modules(hostile.__path__):
        if info.name.startswith("cases_"):
            cases.extend(importlib.import_module(f"hostile.{info.name}").CASES)
    return cases


@pytest.mark.parametrize("case", all_cases(), ids=lambda case: f"item{case.item}-{case.name}")
def test_hostile_input(case: Hostile, tmp_path):
    outcome = run_case(case, tmp_path / case.name)
    assert not outcome.problems, (outcome.problems, outcome.stderr[-3000:], outcome.report[-2000:])
