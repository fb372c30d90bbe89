#!/usr/bin/env python3
"""Throughput and peak memory of `postmortem analyze` against grep on the same log.

Writes a realistic log (default 1 GiB: kernel and training noise with real
error lines scattered through it), then runs, pairwise and several times,

    postmortem analyze --format json LOG
    grep -c -F -f LITERALS LOG        (LITERALS: every anchor postmortem scans for)

and prints each tool's throughput, their ratio (postmortem / grep; the promise
is >= 0.5) and postmortem's peak resident memory (the promise is < 200 MB).

usage: python3 benchmarks/bench_scan.py [--size-mb 1024] [--runs 3] [--keep]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
from pathlib import Path

from common import anchors, measure, prepare

ERROR_LINES = [
    # real lines from public reports (see tests/data/*/SOURCES.md)
    "[  219.470994] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit"
    " error (DBE) has been detected on GPU in the framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1.",
    "[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "[ 8275.824319] zed-editor[11804]: segfault at 25c ip 000075b6d26f2e1a sp 00007ffc262183a0 error 4 in"
    " libnvidia-glcore.so.575.64.03[af2e1a,75b6d2000000+c00000] likely on CPU 10 (core 20, socket 0)",
    "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
]
NOISE = [
    "[{t:12.6f}] eth0: renamed from veth{n:x}",
    "[{t:12.6f}] IPv6: ADDRCONF(NETDEV_CHANGE): cali{n:x}: link becomes ready",
    "[{t:12.6f}] audit: type=1400 audit({t:.3f}:{n}): apparmor=\"STATUS\" operation=\"profile_load\"",
    "Epoch {n}: {p}%|#####     | {n}/5000 [01:{p:02d}<02:10, 9.51it/s, loss={f:.4f}, lr=1.0e-04]",
    "INFO:trainer:step {n} loss {f:.4f} grad_norm {f:.3f} tokens/s {n}",
    "{n}:{n}:{n} [0] NCCL INFO Channel 0{p}/32 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "W{n} 10:{p:02d}:17.250 {n} torch/_dynamo/convert_frame.py:{p}] recompiling forward: shape changed",
]


def write_log(path: Path, size: int, seed: int = 1) -> None:
    """Noise lines with one real error line every ~20,000 lines."""
    rng = random.Random(seed)
    written, t = 0, 0.0
    with open(path, "w", encoding="utf-8") as out:
        while written < size:
            block = []
            for _ in range(5000):
                t += rng.random() / 100
                if rng.random() < 1 / 20000:
                    block.append(rng.choice(ERROR_LINES))
                else:
                    n, p, f = rng.randrange(1, 10**6), rng.randrange(100), rng.random()
                    block.append(rng.choice(NOISE).format(t=t, n=n, p=p, f=f))
            text = "\n".join(block) + "\n"
            out.write(text)
            written += len(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    args = parser.parse_args()
    bench = prepare("pm-bench-")
    grep, postmortem, workdir, literals = bench.grep, bench.postmortem, bench.workdir, bench.literals
    log = workdir / "fleet.log"
    print(f"writing {args.size_mb} MiB log to {log} ...", flush=True)
    write_log(log, args.size_mb * 1024 * 1024)
    size = log.stat().st_size
    measure([grep, "-c", "-F", "-f", str(literals), str(log)], workdir / "out.txt")  # warm the page cache
    pm_times, grep_times, pm_rss = [], [], []
    for run in range(args.runs):
        pm_s, rss, pm_rc = measure([postmortem, "analyze", "--format", "json", str(log)], workdir / "out.txt")
        grep_s, _, _grep_rc = measure([grep, "-c", "-F", "-f", str(literals), str(log)], workdir / "out.txt")
        if pm_rc != 0:
            print(f"postmortem exited {pm_rc}", file=sys.stderr)
            return 1
        pm_times.append(pm_s)
        grep_times.append(grep_s)
        pm_rss.append(rss)
        print(f"run {run + 1}: postmortem {pm_s:.2f} s, grep {grep_s:.2f} s, ratio {grep_s / pm_s:.2f}", flush=True)
    mib = size / 1024 / 1024
    pm_best, grep_best = statistics.median(pm_times), statistics.median(grep_times)
    from postmortem.pipeline import text_prefilter

    print(f"\ninput {mib:.0f} MiB, {len(anchors())} literals, prefilter {text_prefilter().engine},"
          f" median of {args.runs} runs")
    print(f"postmortem: {mib / pm_best:8.1f} MiB/s   peak RSS {max(pm_rss) / 1024 / 1024:.0f} MiB")
    print(f"grep -F:    {mib / grep_best:8.1f} MiB/s")
    print(f"throughput ratio postmortem/grep: {grep_best / pm_best:.2f} (target >= 0.5)")
    if args.keep:
        print(f"kept {log}")
    else:
        shutil.rmtree(workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
