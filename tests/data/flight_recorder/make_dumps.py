"""Make real PyTorch flight-recorder dumps from real 4-rank torch.distributed jobs (CPU, Gloo).

Usage:  python make_dumps.py OUTDIR        (any python with torch >= 2.8; CPU build is enough)

Writes OUTDIR/{skip,size,sleep,barrier,never}/ with, for each rank N of that scenario's job:
  nccl_trace_rank_N        the flight-recorder dump in PyTorch's default (pickle) format,
                           named as PyTorch names it (TORCH_FR_DUMP_TEMP_FILE prefix + rank;
                           the default prefix is /tmp/nccl_trace_rank_)
  fr_json_rank_N.json      the same recorder dumped with the JSON dump API
                           (named so that fr_trace's prefix matching does not pick it up:
                           fr_trace pickle.loads every file whose name holds the prefix)
  rankN.log                the rank's stderr (and stdout): Gloo timeout / error lines, our notes

Each scenario is its own job: 4 processes started with subprocess (this same file with
--worker), rendezvous over env:// on 127.0.0.1 and a free port, process-group timeout
TIMEOUT_S seconds, flight recorder on with TORCH_FR_BUFFER_SIZE=ENTRIES (the older name
TORCH_NCCL_TRACE_BUFFER_SIZE is read too), C++ stacks off (TORCH_FR_CPP_STACK=0).

Normal collectives first on every rank: all_reduce, broadcast(src=0), all_gather on the
default group (pg 0, desc default_pg), all_reduce on a second group made with
new_group([1, 2, 3], group_desc="sub_123") (pg 1), then one more all_reduce on pg 0.
Then the fault, on the default group:
  skip : rank 2 skips the all_reduce (pg 0 seq 5) and calls the next collective (a
         broadcast, its seq 5) straight away; ranks 0,1,3 wait in the all_reduce.
  size : rank 1 calls the all_reduce (pg 0 seq 5) with 4 floats, the others with 8.
  sleep: rank 3 sleeps 3 x TIMEOUT_S before the all_reduce (pg 0 seq 5) and never reaches
         it while the others wait in it.
  barrier: ranks 0-2 wait in a barrier (pg 0 seq 5: an entry with no sizes or dtypes) while
         rank 3 spins in a Python loop for 3 x TIMEOUT_S and never reaches it.
  never: rank 3 spins in a Python loop before its first collective (its recorder is on and
         empty); ranks 0-2 wait in the first all_reduce (pg 0 seq 1).

Which mechanism wrote each file.  Gloo in torch 2.8-2.13 has no watchdog and does NOT dump
by itself on a timeout: TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DUMP_ON_TIMEOUT are read only by
ProcessGroupNCCL's watchdog and the debug-info pipe, neither exists for Gloo (checked: with
both set, a Gloo timeout writes no file).  So every file here is written by this script, in
the rank itself, with the public-in-_C dump functions, which serialize the process-wide
recorder exactly as the NCCL watchdog's dump does:
  pickle: torch._C._distributed_c10d._dump_fr_trace(includeCollectives=True,
          includeStackTraces=True, onlyActive=False)  -> bytes, written as is
  JSON  : torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives=True,
          onlyActive=False)                           -> bytes, written as is
  to the path os.environ["TORCH_FR_DUMP_TEMP_FILE"] + str(rank), as PyTorch would.
The trigger is a timer thread per rank, armed when the rank starts the faulty step and fired
DUMP_AFTER_S seconds later: that is after the Gloo timeout of the ranks that wait, while
every rank is still alive (no rank exits before HOLD_S), so every rank's dump shows the
job as the watchdog would see it at the timeout, and the sleeping rank (which never raises)
dumps too.  The log line "FR dump written by timer thread" records this for each file.
Ranks then exit with os._exit (the process group is wedged, destroy would hang).

Environment knobs (for checks only): MAKE_DUMPS_SCENARIOS=skip,size picks scenarios;
MAKE_DUMPS_NO_DUMP=1 turns this script's dumps off (then no trace file appears at all).

Rerunning gives the same entries (record/seq ids, ops, sizes, dtypes, states, frames, pg
names "0"/"1"); only the times, thread ids and the log's ports change.

What Gloo's recorder holds in 2.13 (see README.md): every entry stays state "scheduled"
with no start/complete times, and pg_config is EMPTY ({"": {name "", desc "", ranks "[]"}}):
only ProcessGroupNCCL calls FlightRecorder::record_pg_ranks.  fr_trace therefore fails on
these dumps (KeyError ('0', 0)); run_fr_trace.py records that and also runs fr_trace on a
copy whose pg_config is filled in from the job's known groups.
"""

import os
import socket
import subprocess
import sys
import threading
import time

WORLD = 4
TIMEOUT_S = 3
DUMP_AFTER_S = TIMEOUT_S + 2
HOLD_S = DUMP_AFTER_S + 2
ENTRIES = 16
SCENARIOS = ("skip", "size", "sleep", "barrier", "never")
PREFIX = "nccl_trace_rank_"
# Fewer elements than the others' 8: every rank then times out and dumps.  With MORE elements
# (16 or 4096 tried) Gloo's TCP pair aborts rank 0 at once (std::terminate on
# gloo::EnforceNotMet "op.preamble.length <= op.nbytes ... Received data size doesn't match
# expected size"), SIGABRT, no dump from rank 0, and the others see "Connection reset by peer".
SIZE_MISMATCH_NUMEL = 4


def log(msg):
    print(f"[make_dumps rank {os.environ.get('RANK')}] {msg}", file=sys.stderr, flush=True)


def dump(rank, why):
    import torch._C._distributed_c10d as c10d

    if os.environ.get("MAKE_DUMPS_NO_DUMP") == "1":  # to check that Gloo writes nothing itself
        log("MAKE_DUMPS_NO_DUMP=1: not dumping")
        return

    pkl = c10d._dump_fr_trace(True, True, False)
    js = c10d._dump_fr_trace_json(True, False)
    path = os.environ["TORCH_FR_DUMP_TEMP_FILE"] + str(rank)
    with open(path, "wb") as f:
        f.write(pkl)
    with open(os.path.join(os.path.dirname(path), f"fr_json_rank_{rank}.json"), "wb") as f:
        f.write(js)
    log(f"FR dump written by {why}: {os.path.basename(path)} ({len(pkl)} bytes pickle, "
        f"{len(js)} bytes json)")


def normal_steps(dist, torch, rank, sub):
    t = torch.ones(8) * (rank + 1)
    dist.all_reduce(t)                                   # pg 0 seq 1
    dist.broadcast(t, src=0)                             # pg 0 seq 2
    out = [torch.zeros(8) for _ in range(WORLD)]
    dist.all_gather(out, t)                              # pg 0 seq 3
    if rank in (1, 2, 3):
        dist.all_reduce(t, group=sub)                    # pg 1 seq 1
    dist.all_reduce(t)                                   # pg 0 seq 4


def spin(seconds):
    """A rank busy in Python (not waiting in any call): where the others wait for it."""
    log(f"spinning in Python for {seconds}s")
    end = time.monotonic() + seconds
    turns = 0
    while time.monotonic() < end:
        turns += 1
    log(f"stopped spinning after {turns} turns")


def faulty_step(dist, torch, rank, scenario, sub):
    t = torch.ones(8)
    if scenario == "never":
        if rank == 3:
            spin(3 * TIMEOUT_S)
        else:
            normal_steps(dist, torch, rank, sub)          # waits in its first all_reduce (pg 0 seq 1)
        return
    if scenario == "barrier":
        if rank == 3:
            spin(3 * TIMEOUT_S)
            return
        dist.barrier()                                    # pg 0 seq 5, ranks 0-2
        return
    if scenario == "skip" and rank == 2:
        log("skipping the all_reduce, calling broadcast")
        dist.broadcast(t, src=0)                          # rank 2: its pg 0 seq 5
        return
    if scenario == "size" and rank == 1:
        t = torch.ones(SIZE_MISMATCH_NUMEL)
        log(f"calling all_reduce with {t.numel()} elements instead of 8")
    if scenario == "sleep" and rank == 3:
        log(f"sleeping {3 * TIMEOUT_S}s before the all_reduce")
        time.sleep(3 * TIMEOUT_S)
        log("woke up; not entering the all_reduce (the job is already dead)")
        return
    dist.all_reduce(t)                                    # pg 0 seq 5
    dist.all_reduce(t)                                    # never reached when the job hangs


def worker(scenario, rank):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=TIMEOUT_S))
    sub = dist.new_group([1, 2, 3], timeout=timedelta(seconds=TIMEOUT_S), group_desc="sub_123")
    if scenario != "never":  # "never": the fault comes first, rank 3 never reaches a collective
        normal_steps(dist, torch, rank, sub)
    log("normal collectives done; starting the faulty step")
    start = time.monotonic()
    timer = threading.Timer(DUMP_AFTER_S, dump, (rank, "timer thread"))
    timer.daemon = True
    timer.start()
    try:
        faulty_step(dist, torch, rank, scenario, sub)
        log("faulty step returned")
    except Exception as e:  # noqa: BLE001 - the Gloo timeout / error, as the job would see it
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        log(f"collective raised {type(e).__name__}: {first}")
    timer.join()
    rest = HOLD_S - (time.monotonic() - start)
    if rest > 0:
        time.sleep(rest)
    log("exiting")
    sys.stderr.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_scenario(outdir, scenario):
    d = os.path.join(outdir, scenario)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith((PREFIX, "fr_json_rank_", "rank")):
            os.remove(os.path.join(d, f))
    port = free_port()
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ)
        env.update({
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "RANK": str(rank), "WORLD_SIZE": str(WORLD),
            "TORCH_FR_BUFFER_SIZE": str(ENTRIES),
            "TORCH_FR_DUMP_TEMP_FILE": os.path.join(os.path.abspath(d), PREFIX),
            "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",  # NCCL-only; set to show Gloo ignores it
            "TORCH_FR_CPP_STACK": "0",
            "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
            "PYTHONWARNINGS": "ignore",
        })
        logf = open(os.path.join(d, f"rank{rank}.log"), "w")  # noqa: SIM115 - closed when the rank ends
        procs.append((subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", scenario, str(rank)],
            env=env, stdout=logf, stderr=subprocess.STDOUT, cwd=d), logf))
    deadline = time.monotonic() + HOLD_S + 60
    for p, logf in procs:
        try:
            p.wait(max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        logf.close()
    print(f"{scenario}: exit codes {[p.returncode for p, _ in procs]}")


def main(argv):
    if len(argv) >= 3 and argv[0] == "--worker":
        worker(argv[1], int(argv[2]))
        return
    if len(argv) != 1:
        sys.exit(__doc__)
    import torch
    print(f"torch {torch.__version__}")
    for s in os.environ.get("MAKE_DUMPS_SCENARIOS", ",".join(SCENARIOS)).split(","):
        run_scenario(argv[0], s)


if __name__ == "__main__":
    main(sys.argv[1:])
