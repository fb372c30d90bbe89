#!/usr/bin/env python3
"""Peak memory and wall time of `postmortem analyze` on the text inputs that once grew without bound.

Writes each input at the size the attack round used (issue 13 item 8; `--scale` shrinks them all),
with the writers the hostile-input tests use (tests/hostile/cases_text.py), then runs once each

    postmortem analyze --format json INPUT
    grep -c -F -f LITERALS INPUT        (LITERALS: every anchor postmortem scans for)

and prints postmortem's peak RSS and wall time, grep's wall time, their ratio, and the verdict found
(the evidence must survive: the Xid 79 after a storm, the CUDA error inside a progress bar).
The promise: peak RSS under 400 MiB whatever the input.

usage: python3 benchmarks/bench_memory.py [--scale 1.0] [--only NAME] [--keep]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from common import measure, prepare

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from hostile.cases_text import (
    MiB,
    write_err_lines,
    write_long_line,
    write_progress_log,
    write_xid_storm,
)

PROMISE_RSS = 400 * MiB
"""Peak resident memory postmortem stays under on every input here, whatever its size."""

INPUTS: dict[str, Callable[[Path, float], None]] = {
    "progress bar, lone \\r only, 39 MB": lambda path, scale: write_progress_log(path, int(39 * MiB * scale)),
    "one 20 MB line of `NVRM: Xid `": lambda path, scale: write_long_line(path, int(20 * MiB * scale)),
    "10 million ERR! lines (nvidia-smi)": lambda path, scale: write_err_lines(path, int(10_000_000 * scale)),
    "Xid 13 storm, 1 GB, then Xid 79": lambda path, scale: write_xid_storm(path, int(1024 * MiB * scale)),
    "Xid 13 storm of new pids, 1 GB": lambda path, scale: write_xid_storm(path, int(1024 * MiB * scale), True),
}


def verdict(report: Path) -> str:
    """The top finding of a JSON report, or what went wrong."""
    try:
        findings = json.loads(report.read_text())["findings"]
    except (OSError, ValueError, KeyError) as exc:
        return f"no report ({type(exc).__name__})"
    return f"{findings[0]['signature']} x{findings[0]['count']}" if findings else "no finding"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the attack's sizes")
    parser.add_argument("--only", help="run only the inputs whose name holds this text")
    parser.add_argument("--keep", action="store_true", help="keep the generated inputs")
    args = parser.parse_args()
    bench = prepare("pm-bench-memory-")
    grep, postmortem, workdir, literals = bench.grep, bench.postmortem, bench.workdir, bench.literals
    print(f"{'input':38} {'size':>9} {'peak RSS':>10} {'wall':>8} {'grep':>7} {'ratio':>6}  verdict")
    worst = 0
    for i, (name, write) in enumerate(INPUTS.items()):
        if args.only and args.only not in name:
            continue
        path, report = workdir / f"input-{i}.log", workdir / f"report-{i}.json"
        write(path, args.scale)
        measure([grep, "-c", "-F", "-f", str(literals), str(path)], workdir / "grep.txt")  # warm the page cache
        wall, rss, status = measure([postmortem, "analyze", "--format", "json", "-o", str(report), str(path)],
                                    workdir / "out.txt")
        grep_s, _, _ = measure([grep, "-c", "-F", "-f", str(literals), str(path)], workdir / "grep.txt")
        worst = max(worst, rss)
        found = verdict(report) if status == 0 else f"exit {status}"
        print(f"{name:38} {path.stat().st_size / MiB:7.0f} MiB {rss / MiB:6.0f} MiB {wall:7.1f}s {grep_s:6.2f}s "
              f"{grep_s / wall:6.3f}  {found}", flush=True)
        if not args.keep:
            path.unlink()
    print(f"\nworst peak RSS {worst / MiB:.0f} MiB (promise < {PROMISE_RSS / MiB:.0f} MiB); ratio = grep / postmortem")
    if args.keep:
        print(f"kept {workdir}")
    else:
        shutil.rmtree(workdir)
    return 0 if worst < PROMISE_RSS else 1


if __name__ == "__main__":
    sys.exit(main())
