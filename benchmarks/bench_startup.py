"""Start-up: `postmortem analyze` of a one-line log and `postmortem --help`, against the interpreter doing nothing
and eu-stack, the fastest native tool a user reaches for first.

`python3 benchmarks/bench_startup.py [--runs 15]` times, in alternation and after one warm-up run of each (which
also fills the user cache, as any earlier run on the machine would): `python -c pass`, `postmortem --help`,
`postmortem analyze LOG` with the user cache and with `--cache off`, and `eu-stack --help` where installed. It prints
the median wall time of each with its spread, the ratios, and the ten largest cumulative imports of the analysis
(`python -X importtime`), the figures issue 28 asks to be published.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import compile_postmortem, measure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    compile_postmortem()
    with tempfile.TemporaryDirectory(prefix="pm-startup-") as scratch:
        work = Path(scratch)
        log = work / "one.log"
        log.write_text("epoch 1 loss 0.5\n", encoding="utf-8")
        os.environ["POSTMORTEM_CACHE"] = str(work / "cache")
        script = Path(sys.executable).parent / "postmortem"  # the console script an install puts beside python
        postmortem = [str(script)] if script.exists() else [sys.executable, "-m", "postmortem"]
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "postmortem --help": [*postmortem, "--help"],
            "postmortem analyze (cache)": [*postmortem, "analyze", str(log)],
            "postmortem analyze (--cache off)": [*postmortem, "--cache", "off", "analyze", str(log)],
        }
        if eu_stack := shutil.which("eu-stack"):
            commands["eu-stack --help"] = [eu_stack, "--help"]
        times: dict[str, list[float]] = {name: [] for name in commands}
        for run in range(args.runs + 1):
            for name, command in commands.items():
                wall, _rss, status = measure(command, work / "out")
                assert status == 0, (name, (work / "out").read_text(errors="replace"))
                if run:  # the first round warms the disk cache and fills the user cache
                    times[name].append(wall)
        base = statistics.median(times["python -c pass"])
        print(f"{'command':<34} {'median':>9} {'spread':>17} {'x python':>9}")
        for name, walls in times.items():
            median = statistics.median(walls)
            print(f"{name:<34} {median * 1e3:7.1f} ms {min(walls) * 1e3:6.1f}-{max(walls) * 1e3:6.1f} ms "
                  f"{median / base:8.1f}x")
        if eu_stack:
            ratio = statistics.median(times["postmortem analyze (cache)"]) / statistics.median(times["eu-stack --help"])
            print(f"postmortem analyze / eu-stack: {ratio:.1f}x")
        profile = subprocess.run([sys.executable, "-X", "importtime", "-m", "postmortem", "analyze", str(log)],
                                 capture_output=True, text=True, check=True)
        rows = [line.split("|") for line in profile.stderr.splitlines() if line.startswith("import time:")]
        largest = sorted(((int(row[1]), row[2].rstrip()) for row in rows if row[1].strip().isdigit()), reverse=True)
        print("largest cumulative imports of `postmortem analyze` (us):")
        for micros, module in largest[:10]:
            print(f"  {micros:>8} {module}")


if __name__ == "__main__":
    main()
