"""`postmortem buckets` and `postmortem report` on a large store, against one SQL GROUP BY on the same store.

    python3 benchmarks/bench_buckets.py [--cases 1000000] [--runs 3]

Writes a store of synthetic cases straight through SQLite (the schema and migrations of postmortem's own store;
causes, signatures, stack signatures and fingerprints drawn from a few hundred buckets, a thousand hosts, one GPU
fault in twenty cases, one finding and one driver version per case, one suspect event per unknown case), then times,
alternately run by run, the whole `postmortem buckets --format json` and `postmortem report` commands (start-up
included) and the sqlite3 shell's `SELECT cause, signature, COUNT(*) ... GROUP BY` (what a person would type
instead). Peak RSS from wait4 (the store is written by a child process, so that the measured commands do not inherit
the writer's memory).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import compile_postmortem, measure

CAUSES = ("gpu-oom", "nccl-timeout", "xid-79", "host-oom", "native-crash", "unknown", "driver-mismatch",
          "illegal-memory-access", "gpu-memory-ecc", "arch-mismatch")
GROUP_BY = ("SELECT cause, signature, COUNT(*), MIN(time), MAX(time), COUNT(DISTINCT host) FROM cases "
            "WHERE status = 'ok' GROUP BY cause, signature;")


def write_store(path: Path, cases: int, seed: int = 7) -> None:
    """A store of `cases` synthetic analysed cases (postmortem's schema, written in batches of 50,000)."""
    from postmortem.fleet import store

    random.seed(seed)
    conn = store.connect(path)
    conn.execute("PRAGMA synchronous=OFF")
    batch = 50_000
    for start in range(0, cases, batch):
        rows, locations, faults, events, findings, facts = [], [], [], [], [], []
        for n in range(start, min(start + batch, cases)):
            case = f"{n:016x}"
            cause = random.choice(CAUSES)
            stack = f"stack{random.randrange(40)}" if cause in ("native-crash", "unknown") and n % 2 else None
            fingerprint = f"fp{random.randrange(200)}" if cause == "unknown" else None
            host = f"node{random.randrange(1000):04d}"
            when = f"2026-{random.randrange(1, 13):02d}-{random.randrange(1, 29):02d}T{random.randrange(24):02d}:00:00"
            rows.append((case, case, "ok", cause, f"{cause}-sig{random.randrange(3)}", stack, fingerprint, when, host,
                         "2026-12-07T00:00:00"))
            locations.append((f"/archive/{host}/{case}/dmesg.txt", "k", case, "2026-12-07T00:00:00"))
            layer = "hardware" if cause in ("xid-79", "gpu-memory-ecc") else "application"
            findings.append((case, 0, f"{cause}-sig0", cause, layer, "error", 0.9, cause, 1, when, when, None))
            facts.append((case, "driver_version", f"5{random.randrange(30, 36)}.{random.randrange(100):02d}"))
            if n % 20 == 0:
                faults.append((case, host, f"0000:{random.randrange(8):02x}:00.0", None, None, cause, f"{cause}-sig0"))
            if cause == "unknown":
                events.append((case, "e1", "suspect", "log-line", when, "dmesg.txt", 1, f"odd line {fingerprint}",
                               fingerprint, 1, "{}"))
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO cases (id, digest, status, cause, signature, stack_signature, fingerprint, "
                         "time, host, analysed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.executemany("INSERT INTO locations VALUES (?, ?, ?, ?)", locations)
        conn.executemany("INSERT INTO gpu_faults VALUES (?, ?, ?, ?, ?, ?, ?)", faults)
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", events)
        conn.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", findings)
        conn.executemany("INSERT INTO facts VALUES (?, ?, ?)", facts)
        conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cases", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write-only", metavar="DB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_only:
        write_store(Path(args.write_only), args.cases)
        return
    compile_postmortem()
    postmortem = str(Path(sys.executable).with_name("postmortem"))
    sqlite = shutil.which("sqlite3")
    workdir = Path(tempfile.mkdtemp(prefix="bench-buckets-"))
    try:
        db = workdir / "store.db"
        # written by a child: a child forked later inherits this process's peak RSS in its own
        subprocess.run([sys.executable, __file__, "--cases", str(args.cases), "--write-only", str(db)], check=True)
        print(f"store: {args.cases:,} cases, {db.stat().st_size / 2**20:.0f} MiB")
        tools = {"postmortem buckets --format json": [postmortem, "buckets", "--db", str(db), "--format", "json"],
                 "postmortem report": [postmortem, "report", "--db", str(db), "-o", str(workdir / "report.html")]}
        if sqlite:
            tools["sqlite3 GROUP BY cause, signature"] = [sqlite, "-readonly", str(db), GROUP_BY]
        times: dict[str, list[float]] = {name: [] for name in tools}
        peaks: dict[str, int] = {}
        for _ in range(args.runs):
            for name, command in tools.items():
                wall, rss, status = measure(command, workdir / "out.txt")
                if status != 0:
                    sys.exit(f"{name} exited with {status}: {(workdir / 'out.txt').read_text()[-2000:]}")
                times[name].append(wall)
                peaks[name] = max(peaks.get(name, 0), rss)
        for name in tools:
            runs = ", ".join(f"{t:.2f}" for t in times[name])
            median = statistics.median(times[name])
            print(f"{name:40} {median:7.2f} s (runs {runs})  peak RSS {peaks[name] / 2**20:6.0f} MiB")
        if sqlite:
            ratio = statistics.median(times["postmortem buckets --format json"]) / statistics.median(
                times["sqlite3 GROUP BY cause, signature"])
            print(f"ratio buckets/sqlite3: {ratio:.2f}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
