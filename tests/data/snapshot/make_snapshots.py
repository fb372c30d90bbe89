"""Make the example snapshots of signatures/hang.yaml: real hung processes, captured by `postmortem snapshot`.

    python tests/data/snapshot/make_snapshots.py [OUTDIR] [--torch-python /path/to/python-with-torch]

Each scenario starts a real job, waits until it is hung, runs `postmortem snapshot --job PID`, kills the job and
keeps the case directory as SCENARIO/ without the node's kernel log (this machine's, which says nothing about the
scenario) and without the cores: they are about a megabyte a process, and their libraries are this machine's;
the process files hold every thread's frames as read from them here (the tests take cores of their own):

- barrier-sleeper: a multiprocessing job of 4 workers; worker 2 sleeps instead of calling Barrier.wait().
- python-deadlock: two threads take two locks in opposite orders; the main thread joins them.
- gloo-rank-skips (needs a Python with torch, --torch-python): a 4-rank Gloo job launched with torchrun; rank 2
  sleeps instead of calling the all_reduce the others wait in.
- nvidia-smi-hangs: the barrier job again, with an `nvidia-smi` on PATH that never answers (a stand-in that
  sleeps), so the snapshot records the hang of the node tool as it records a real one.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))
POSTMORTEM = [sys.executable, "-m", "postmortem"]

BARRIER = textwrap.dedent("""\
    import multiprocessing as mp, sys, time
    def sleep_instead(ready):
        ready.wait()
        time.sleep(3600)
    def worker(barrier, ready, index):
        if index == 2:
            sleep_instead(ready)
        barrier.wait()
    if __name__ == "__main__":
        barrier, ready = mp.Barrier(4), mp.Event()
        workers = [mp.Process(target=worker, args=(barrier, ready, i)) for i in range(4)]
        for w in workers:
            w.start()
        ready.set()
        print("ready", flush=True)
        for w in workers:
            w.join()
""")
DEADLOCK = textwrap.dedent("""\
    import threading, time
    first, second = threading.Lock(), threading.Lock()
    both = threading.Barrier(2)
    def forward():
        with first:
            both.wait()
            with second:
                pass
    def backward():
        with second:
            both.wait()
            with first:
                pass
    threads = [threading.Thread(target=forward, name="forward"), threading.Thread(target=backward, name="backward")]
    for t in threads:
        t.start()
    time.sleep(0.5)
    print("ready", flush=True)
    for t in threads:
        t.join()
""")
GLOO = textwrap.dedent("""\
    import datetime, os, time
    import torch, torch.distributed as dist
    def train_step(rank):
        value = torch.ones(8)
        if rank == 2:
            time.sleep(3600)  # this rank never reaches the all_reduce
        dist.all_reduce(value)
        return value
    def main():
        dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
        rank = dist.get_rank()
        dist.barrier()
        if rank == 0:
            print("ready", flush=True)
        train_step(rank)
    main()
""")


def _kill_tree(pid: int) -> None:
    """The job and every process under it (torchrun starts its workers in sessions of their own)."""
    from postmortem.capture.snapshot import job_processes

    for member in reversed(job_processes([pid])):
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)


def _run_scenario(name: str, command: list[str], out: Path, env: dict[str, str], settle_s: float = 1.0) -> None:
    with tempfile.TemporaryDirectory() as work:
        script_dir = Path(work)
        job = subprocess.Popen(command, cwd=script_dir, stdout=subprocess.PIPE, env=env, start_new_session=True)
        try:
            assert job.stdout is not None
            line = job.stdout.readline()
            if b"ready" not in line:
                raise SystemExit(f"{name}: the job did not get ready ({line!r})")
            time.sleep(settle_s)
            case = script_dir / name
            subprocess.run([*POSTMORTEM, "snapshot", "--job", str(job.pid), "-o", str(case), "--telemetry", "0",
                            "--timeout", "3s"], check=True, cwd=ROOT, env=env)
        finally:
            _kill_tree(job.pid)
            job.wait()
        kept = out / name
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir(parents=True)
        for path in sorted(case.iterdir()):
            if path.name != "kernel.log" and not path.name.startswith("core."):
                shutil.copy(path, kept / path.name)
        print(f"wrote {kept}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?", default=str(HERE))
    parser.add_argument("--torch-python", default=None)
    parser.add_argument("--only", default=None, help="one scenario's name")
    args = parser.parse_args()
    out = Path(args.out)
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as scripts:
        folder = Path(scripts)
        (folder / "barrier.py").write_text(BARRIER)
        (folder / "deadlock.py").write_text(DEADLOCK)
        (folder / "gloo.py").write_text(GLOO)

        def wanted(name: str) -> bool:
            return args.only in (None, name)

        if wanted("barrier-sleeper"):
            _run_scenario("barrier-sleeper", [sys.executable, str(folder / "barrier.py")], out, env)
        if wanted("python-deadlock"):
            _run_scenario("python-deadlock", [sys.executable, str(folder / "deadlock.py")], out, env)
        stub = folder / "bin"
        stub.mkdir()
        (stub / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 3600\n")
        (stub / "nvidia-smi").chmod(0o755)
        if wanted("nvidia-smi-hangs"):
            _run_scenario("nvidia-smi-hangs", [sys.executable, str(folder / "barrier.py")], out,
                      {**env, "PATH": f"{stub}:{env.get('PATH', '')}"})
        if args.torch_python and wanted("gloo-rank-skips"):
            torchrun = Path(args.torch_python).parent / "torchrun"
            _run_scenario("gloo-rank-skips", [str(torchrun), "--standalone", "--nproc-per-node", "4",
                                              str(folder / "gloo.py")], out,
                          {**env, "OMP_NUM_THREADS": "1"}, settle_s=2.0)
    shutil.rmtree(out / "__pycache__", ignore_errors=True)


if __name__ == "__main__":
    main()
