#!/usr/bin/env python3
"""Build every hostile input of tests/hostile/ and run it through `postmortem`, bounded; print what each cost.

    .venv/bin/python tools/hostile_inputs.py [--keep DIR] [--only SUBSTRING]

Each case runs as tests/test_hostile_inputs.py runs it (a child process under
its RLIMIT_AS and wall bound); the table gives the item of issue 13 it attacks,
the exit status, wall time, peak RSS and any rule it broke. With --keep, the
built inputs stay in DIR for running by hand; otherwise a temporary directory
is removed at the end.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import hostile
from hostile.harness import Hostile, run_case


def all_cases() -> list[Hostile]:
    cases: list[Hostile] = []
    for info in sorted(pkgutil.iter_modules(hostile.__path__), key=lambda i: i.name):
        if info.name.startswith("cases_"):
            cases.extend(importlib.import_module(f"hostile.{info.name}").CASES)
    return sorted(cases, key=lambda c: (c.item, c.name))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="build the inputs here and keep them")
    parser.add_argument("--only", default="", help="run only cases whose name holds this")
    args = parser.parse_args()
    cases = [c for c in all_cases() if args.only in c.name]
    broken = 0
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch)
        print(f"{'item':>4}  {'case':44} {'exit':>4} {'wall s':>7} "
              f"{'bound':>6} {'peak MiB':>8} {'AS MiB':>6}  problems")
        for case in cases:
            outcome = run_case(case, root / case.name)
            broken += bool(outcome.problems)
            print(f"{case.item:>4}  {case.name:44} {outcome.returncode:>4} {outcome.wall_s:7.2f} {case.wall_s:6.0f} "
                  f"{outcome.peak_rss_kib / 1024:8.0f} {case.address_space >> 20:6}  {'; '.join(outcome.problems)}")
    print(f"{len(cases)} case(s), {broken} broke a rule")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
