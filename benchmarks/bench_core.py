"""postmortem vs gdb on real cores, source lines on: wall time and peak RSS, pairwise over several runs.

Two cases, each built with `gcc -g` and crashed under a temporary directory
(deleted afterwards):

- big: a program that touches about 2.5 GB of heap, starts 8 threads and
  crashes; `postmortem analyze CORE --format json -o FILE` against
  `gdb -batch -ex 'thread apply all bt' EXE CORE`. Every frame gdb gives a
  source line must have the same function, file and line in postmortem's
  JSON, thread by thread, and the program's own frames must have one.
- deep: a recursion of 200,000 small frames run under a stack limit that
  holds them, crashing at the bottom; postmortem against gdb's `bt` of the
  crashed thread, which is killed past --gdb-timeout ("gdb > N s").
  postmortem's JSON must hold every frame (not truncated) down to `main`.

Any check that fails stops the script with the reason. Peak RSS is each
child's ru_maxrss from os.wait4. Needs gcc, gdb, and a core_pattern that
writes `core` in the working directory.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import compile_postmortem, measure

BIG = r"""
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void *idle(void *arg) { for (;;) pause(); return arg; }
__attribute__((noinline)) static void crash(volatile int *p) { *p = 1; }
int main(int argc, char **argv) {
    size_t mb = argc > 1 ? strtoul(argv[1], 0, 10) : 2560;
    for (size_t i = 0; i < mb / 64; i++) { char *block = malloc(64 << 20); memset(block, (int)i + 1, 64 << 20); }
    pthread_t threads[8];
    for (int i = 0; i < 8; i++) pthread_create(&threads[i], 0, idle, 0);
    usleep(100000);
    crash(0);
    return 0;
}
"""
BIG_FUNCTIONS = ("idle", "crash", "main")
"""The big program's own functions: each frame of them must carry big.c and a line."""

DEEP = r"""
#include <stdlib.h>
__attribute__((noinline)) static int down(int depth) {
    if (depth == 0) return *(volatile int *)0;
    return down(depth - 1) + 1;
}
int main(int argc, char **argv) { return down(argc > 1 ? atoi(argv[1]) : 200000); }
"""
DEEP_OPTIMISE = "-O0"
"""From -O2 gcc turns `down(depth - 1) + 1` into a loop (tail recursion with an accumulator): no frames."""
DEEP_STACK_PER_FRAME = 256
"""Bytes of stack limit per recursion level: `down` at -O0 takes 32 (return address, rbp, one spill slot)."""
DEEP_STACK_SLACK = 8 << 20
"""Stack limit beyond the recursion's: the loader, libc start-up, and the environment and arguments."""

GDB = ["gdb", "-q", "-batch", "-nx", "-ex", "set debuginfod enabled off"]
GDB_THREAD = re.compile(r"^Thread \d+ \(.*\(LWP (\d+)\)\)")
GDB_FRAME = re.compile(r"^#(\d+) +(?:0x[0-9a-f]+ in )?(\S+) \(.*\) at (\S+):(\d+)$")
"""gdb's `bt` line of a frame with a source line: number, function, file, line."""


@dataclass(frozen=True)
class Case:
    """One core and the two commands compared on it; `check` reads both outputs and says what it found."""

    name: str
    ours: list[str]
    gdb: list[str]
    report: Path
    check: Callable[[dict, str, bool], str]


def build(directory: Path, name: str, source: str, optimise: str) -> Path:
    """Compile `source` with -g (the frames then have source lines to read) in a folder of its own."""
    directory.mkdir()
    (directory / f"{name}.c").write_text(source)
    subprocess.run(["gcc", optimise, "-g", "-pthread", "-o", name, f"{name}.c"], cwd=directory, check=True)
    return directory / name


def make_core(exe: Path, args: list[str], stack: int | None = None) -> Path:
    """Run `exe` with core dumps on (and `stack` bytes of stack limit): the core it leaves."""
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        if stack is not None:
            resource.setrlimit(resource.RLIMIT_STACK, (stack, resource.getrlimit(resource.RLIMIT_STACK)[1]))

    subprocess.run([str(exe), *args], cwd=exe.parent, preexec_fn=limits, capture_output=True, check=False)
    core = exe.parent / "core"
    if not core.exists():
        sys.exit("no core written: set /proc/sys/kernel/core_pattern to 'core' (and allow the stack limit)")
    print(f"{exe.name}: core {core.stat().st_size / 2**20:,.0f} MiB apparent, "
          f"{core.stat().st_blocks * 512 / 2**20:,.0f} MiB on disk")
    return core


def lined(frame: dict) -> list[tuple[str, str, int]]:
    """A JSON frame as gdb lists it, inlined functions first: (function, file name, line) of each that has a line."""
    rows = [(i["function"], i["file"], i["line"]) for i in frame["inlined"]]
    rows.append((frame["symbol"], frame["file"], frame["line"]))
    return [(function, Path(file).name, line) for function, file, line in rows if file and line]


def gdb_lines(text: str) -> dict[int, list[tuple[str, str, int]]]:
    """gdb's frames with a source line, per thread id (0 for a plain `bt`, which has no thread headers).

    Frame #0 starts a thread's list afresh: gdb prints the crashed thread's #0 once on loading the core.
    """
    threads: dict[int, list[tuple[str, str, int]]] = {}
    tid = 0
    for line in text.splitlines():
        if header := GDB_THREAD.match(line):
            tid = int(header[1])
        elif frame := GDB_FRAME.match(line):
            if frame[1] == "0":
                threads[tid] = []
            threads[tid].append((frame[2], Path(frame[3]).name, int(frame[4])))
    if len(threads) > 1:
        threads.pop(0, None)
    return threads


def up_to_main(frames: list[dict]) -> list[dict]:
    """Frames cut after `main`, where gdb's `bt` stops."""
    names = [f["symbol"] for f in frames]
    return frames[: names.index("main") + 1] if "main" in names else frames


def check_big(report: dict, gdb_text: str, _gdb_done: bool) -> str:
    """Source lines: the program's frames have them, and every thread's lined frames are gdb's."""
    threads = report["cores"][0]["threads"]
    ours = {t["tid"]: rows for t in threads if (rows := [row for f in up_to_main(t["frames"]) for row in lined(f)])}
    for thread in threads:
        for frame in thread["frames"]:
            if frame["symbol"] in BIG_FUNCTIONS and not (frame["file"] and frame["line"]):
                sys.exit(f"big: thread {thread['tid']}: frame {frame['symbol']} has no source line: {frame}")
    theirs = gdb_lines(gdb_text)
    if ours != theirs:
        wrong = sorted(tid for tid in ours.keys() | theirs.keys() if ours.get(tid) != theirs.get(tid))
        sys.exit(f"big: source lines differ from gdb's in threads {wrong}: "
                 f"postmortem {ours.get(wrong[0])}, gdb {theirs.get(wrong[0])}")
    count = sum(len(rows) for rows in ours.values())
    return f"{len(ours)} threads, {count} frames with file:line, all equal to gdb's"


def check_deep(depth: int) -> Callable[[dict, str, bool], str]:
    """Every frame: `depth` + 1 of `down`, no truncation, `main` after them; gdb's count and lines where it finished."""
    def check(report: dict, gdb_text: str, gdb_done: bool) -> str:
        crashed = [t for t in report["cores"][0]["threads"] if t["crashed"]]
        if len(crashed) != 1:
            sys.exit(f"deep: {len(crashed)} crashed threads in postmortem's JSON")
        thread = crashed[0]
        frames = thread["frames"]
        downs = sum(f["symbol"] == "down" for f in frames)
        names = [f["symbol"] for f in frames]
        if thread["truncated"] or downs < depth + 1 or "main" not in names:
            sys.exit(f"deep: postmortem has {len(frames):,} frames ({downs:,} of down, main "
                     f"{'found' if 'main' in names else 'missing'}), truncated: {thread['truncated']}")
        at = names.index("main")
        source = f"{Path(frames[at]['file'] or '?').name}:{frames[at]['line']}"
        where = f"{len(frames):,} frames, main is frame #{at:,} at {source}"
        if not gdb_done:
            return where + " (gdb did not finish)"
        theirs = gdb_lines(gdb_text).get(0, [])
        ours = [row for f in up_to_main(frames) for row in lined(f)]
        if ours != theirs:
            first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            sys.exit(f"deep: frames differ from gdb's from #{first:,}: postmortem {len(ours):,} "
                     f"({ours[first:first + 1]}), gdb {len(theirs):,} ({theirs[first:first + 1]})")
        return where + f", all {len(theirs):,} equal to gdb's"
    return check


def compare(case: Case, runs: int, gdb_timeout: float, workdir: Path) -> None:
    """Warm both up, time them alternately, then check the last outputs; print what was found, medians and ratios.

    The outputs are read only after the timed runs: a child's ru_maxrss counts the memory of the parent
    it was forked from, and the deep case's JSON, parsed, takes hundreds of MiB.
    """
    out = {name: workdir / f"{case.name}-{name}.txt" for name in ("ours", "gdb")}
    _wall, _rss, status = measure(case.ours, out["ours"])
    if status:
        sys.exit(f"{case.name}: postmortem exited {status}: {out['ours'].read_text()[-2000:]}")
    gdb_wall, _rss, gdb_status = measure(case.gdb, out["gdb"], gdb_timeout)
    gdb_done = gdb_status == 0
    if not gdb_done and gdb_wall < gdb_timeout:
        sys.exit(f"{case.name}: gdb exited {gdb_status}: {out['gdb'].read_text()[-2000:]}")
    rows = []
    for _ in range(runs):
        ours = measure(case.ours, out["ours"])
        gdb = measure(case.gdb, out["gdb"], gdb_timeout) if gdb_done else (gdb_wall, 0, 0)
        if ours[2] or gdb[2]:
            sys.exit(f"{case.name}: a run failed (postmortem {ours[2]}, gdb {gdb[2]})")
        rows.append((ours[0], ours[1] / 2**20, gdb[0], gdb[1] / 2**20))
    report = json.loads(case.report.read_text())
    if len(report["cores"]) != 1:
        sys.exit(f"{case.name}: postmortem read {len(report['cores'])} cores: {report['inputs']}")
    print(f"{case.name}: {case.check(report, out['gdb'].read_text(errors='replace'), gdb_done)}")
    print(f"  postmortem wall {statistics.median(r[0] for r in rows):.3f} s  "
          f"peak RSS {statistics.median(r[1] for r in rows):.1f} MiB")
    if not gdb_done:
        print(f"  gdb        > {gdb_timeout:g} s (killed; not timed further)")
        return
    print(f"  gdb        wall {statistics.median(r[2] for r in rows):.3f} s  "
          f"peak RSS {statistics.median(r[3] for r in rows):.1f} MiB")
    print(f"  ratio postmortem/gdb: wall {statistics.median(r[0] / r[2] for r in rows):.2f}, "
          f"peak RSS {statistics.median(r[1] / r[3] for r in rows):.2f} (median of {runs} pairwise runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=2560, help="heap of the big case's core")
    parser.add_argument("--depth", type=int, default=200_000, help="recursion levels of the deep case")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--gdb-timeout", type=float, default=300.0, help="seconds before gdb is killed")
    parser.add_argument("--only", choices=("big", "deep"), help="run one case")
    args = parser.parse_args()
    postmortem = shutil.which("postmortem") or str(Path(sys.executable).parent / "postmortem")
    compile_postmortem()
    with tempfile.TemporaryDirectory(prefix="bench-core-") as temp:
        workdir = Path(temp)
        cases = []
        if args.only in (None, "big"):
            exe = build(workdir / "big", "big", BIG, "-O1")
            core = make_core(exe, [str(args.megabytes)])
            report = workdir / "big.json"
            cases.append(Case("big", [postmortem, "analyze", str(core), "--format", "json", "-o", str(report)],
                              [*GDB, "-ex", "thread apply all bt", str(exe), str(core)], report, check_big))
        if args.only in (None, "deep"):
            exe = build(workdir / "deep", "deep", DEEP, DEEP_OPTIMISE)
            core = make_core(exe, [str(args.depth)], args.depth * DEEP_STACK_PER_FRAME + DEEP_STACK_SLACK)
            report = workdir / "deep.json"
            cases.append(Case("deep", [postmortem, "analyze", str(core), "--format", "json", "-o", str(report)],
                              [*GDB, "-ex", "bt", str(exe), str(core)], report, check_deep(args.depth)))
        for case in cases:
            compare(case, args.runs, args.gdb_timeout, workdir)


if __name__ == "__main__":
    main()
