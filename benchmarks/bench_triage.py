"""`postmortem triage` on the real issues of tests/triage, against grep over the same bodies.

`python3 benchmarks/bench_triage.py [--runs 3] [--grow 1]` triages every issue in one process (the signature
database loaded once, as the GitHub Action and a bot do), and times `grep -c` for the CUDA error words over the
same bodies written to files, as the hand triage it replaces starts. --grow N repeats each body N times (a
body of pasted logs as long as GitHub allows is about 65,536 characters). It prints the time per issue, the
slowest issue, and the ratio to grep.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from postmortem.render.triage_comment import render_markdown
from postmortem.signatures import load_default
from postmortem.triage import triage
from postmortem.triage.issue import read_issue

CASES = Path(__file__).parent.parent / "tests" / "triage"


def grown(path: Path, times: int) -> bytes:
    issue = json.loads(path.read_text())
    issue["body"] = "\n".join([issue["body"] or ""] * times)
    return json.dumps(issue).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--grow", type=int, default=1)
    args = parser.parse_args()
    issues = [(path.parent.name, grown(path, args.grow)) for path in sorted(CASES.glob("*/issue.json"))]
    load_default()
    per_issue: dict[str, float] = {}
    for _ in range(args.runs):
        for name, data in issues:
            started = time.perf_counter()
            render_markdown(triage(read_issue(data, name)))
            per_issue[name] = min(per_issue.get(name, 1e9), time.perf_counter() - started)
    ours = sum(per_issue.values())
    with tempfile.TemporaryDirectory() as folder:
        for name, data in issues:
            Path(folder, name).write_bytes(data)
        started = time.perf_counter()
        for _ in range(args.runs):
            subprocess.run(["grep", "-rciE", "cuda error|xid|segmentation fault|out of memory", folder],
                           capture_output=True, check=False)
        grep = (time.perf_counter() - started) / args.runs
    slowest = max(per_issue, key=per_issue.__getitem__)
    size = sum(len(data) for _, data in issues)
    print(f"{len(issues)} issues, {size / 1e6:.2f} MB: triage {ours * 1e3:.0f} ms in all, "
          f"{ours / len(issues) * 1e3:.1f} ms an issue (slowest {slowest}: {per_issue[slowest] * 1e3:.0f} ms); "
          f"grep -c over the same bodies {grep * 1e3:.1f} ms ({ours / grep:.0f}x grep)")


if __name__ == "__main__":
    main()
