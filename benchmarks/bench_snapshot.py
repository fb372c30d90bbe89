"""How long `postmortem snapshot` stops a live process, against py-spy and gdb reading the same process.

    python3 benchmarks/bench_snapshot.py [--threads 10] [--runs 20]

Starts a Python process whose threads spin in Python code (the worst case: every thread holds registers and a
Python stack that change all the time), then, alternately, run by run: postmortem's capture (core/live.py: the
stop itself is measured from the first PTRACE_INTERRUPT to the last PTRACE_DETACH, and the whole capture with
the modules read before the stop), `py-spy dump` (which pauses the process while it reads, and reports no stop
time: its wall time bounds its stop) and `gdb -batch -p PID -ex 'thread apply all bt'` (the process is stopped
from attach to detach: its wall time is its stop). Prints medians and the ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from postmortem.core import live

SPIN = textwrap.dedent("""\
    import sys, threading, time
    def spin(n):
        count = 0
        while True:
            count += n
    for i in range(int(sys.argv[1])):
        threading.Thread(target=spin, args=(i,), daemon=True).start()
    print("ready", flush=True)
    time.sleep(3600)
""")
PROMISE_MS = 50.0


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=120)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=10, help="spinning threads besides the main one")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    child = subprocess.Popen([sys.executable, "-c", SPIN, str(args.threads)], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(0.5)
        py_spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        gdb = shutil.which("gdb")
        stops, captures, spy, gdbs, threads = [], [], [], [], 0
        for _ in range(args.runs):
            start = time.perf_counter()
            taken = live.capture(child.pid)
            captures.append(time.perf_counter() - start)
            stops.append(taken.stopped_s)
            threads = len(taken.threads)
            if py_spy:
                spy.append(_wall([py_spy, "dump", "--pid", str(child.pid)]))
            if gdb:
                gdbs.append(_wall([gdb, "-batch", "-nx", "-p", str(child.pid), "-ex", "thread apply all bt"]))
    finally:
        child.kill()
        child.wait()
    stop_ms = statistics.median(stops) * 1000
    print(f"process with {threads} threads, {args.runs} runs, medians:")
    print(f"  postmortem stop          {stop_ms:8.2f} ms  (max {max(stops) * 1000:.2f} ms)")
    print(f"  postmortem whole capture {statistics.median(captures) * 1000:8.2f} ms")
    for name, times in (("py-spy dump (wall)", spy), ("gdb attach + bt (wall)", gdbs)):
        if times:
            median = statistics.median(times) * 1000
            print(f"  {name:24} {median:8.2f} ms  ratio postmortem stop / this: {stop_ms / median:.3f}")
        else:
            print(f"  {name:24} not installed")
    print(f"promise: stop under {PROMISE_MS:g} ms: {'met' if stop_ms < PROMISE_MS else 'NOT met'}")


if __name__ == "__main__":
    main()
