"""postmortem vs gdb on one large real core: wall time and peak RSS, pairwise over several runs.

Builds a C program that touches about 2.5 GB of heap, starts 8 threads and
crashes; its core (written under a temporary directory, deleted afterwards)
is read by `postmortem analyze CORE --format json -o FILE` and by
`gdb -batch -ex 'thread apply all bt' EXE CORE`, alternately. Peak RSS is
each child's ru_maxrss from os.wait4. Needs gcc, gdb, and a core_pattern that
writes `core` in the working directory.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import compile_postmortem, measure

PROGRAM = r"""
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


def make_core(directory: Path, megabytes: int) -> tuple[Path, Path]:
    (directory / "big.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-O1", "-g", "-pthread", "-o", "big", "big.c"], cwd=directory, check=True)
    limit = lambda: resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))  # noqa: E731
    subprocess.run(["./big", str(megabytes)], cwd=directory, preexec_fn=limit, capture_output=True, check=False)
    core = directory / "core"
    if not core.exists():
        sys.exit("no core written: set /proc/sys/kernel/core_pattern to 'core'")
    return directory / "big", core


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=2560)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    postmortem = shutil.which("postmortem") or str(Path(sys.executable).parent / "postmortem")
    compile_postmortem()
    with tempfile.TemporaryDirectory(prefix="bench-core-") as temp:
        exe, core = make_core(Path(temp), args.megabytes)
        print(f"core: {core.stat().st_size / 2**30:.2f} GiB apparent, "
              f"{core.stat().st_blocks * 512 / 2**30:.2f} GiB on disk")
        ours = [postmortem, "analyze", str(core), "--format", "json", "-o", str(Path(temp) / "report.json")]
        gdb = ["gdb", "-q", "-batch", "-nx", "-ex", "set debuginfod enabled off", "-ex", "thread apply all bt",
               str(exe), str(core)]
        measure(ours, Path(temp) / "warm.txt")
        measure(gdb, Path(temp) / "warm.txt")
        rows = []
        for _ in range(args.runs):
            ours_wall, ours_rss, ours_status = measure(ours, Path(temp) / "ours.txt")
            gdb_wall, gdb_rss, gdb_status = measure(gdb, Path(temp) / "gdb.txt")
            if ours_status or gdb_status:
                sys.exit(f"a run failed (postmortem {ours_status}, gdb {gdb_status}); see {temp}")
            rows.append((ours_wall, ours_rss / 1024, gdb_wall, gdb_rss / 1024))
    for name, index in (("postmortem", 0), ("gdb", 2)):
        print(f"{name:10} wall {statistics.median(r[index] for r in rows):.3f} s  "
              f"peak RSS {statistics.median(r[index + 1] for r in rows) / 1024:.1f} MiB")
    print(f"ratio postmortem/gdb: wall {statistics.median(r[0] / r[2] for r in rows):.2f}, "
          f"peak RSS {statistics.median(r[1] / r[3] for r in rows):.2f} (median of {args.runs} pairwise runs)")


if __name__ == "__main__":
    main()
