"""A 4-rank job as a launcher starts one: each rank a fresh interpreter with RANK and WORLD_SIZE in its environment,
ranks 0, 1 and 3 waiting in a barrier of four, rank 2 stuck elsewhere, by the scenario in argv[1]:

- mutex: rank 2 locks a native mutex it already holds (through ctypes): a self-deadlock in pthread_mutex_lock;
- flock: rank 2 waits for an fcntl lock on argv[2] that the launcher holds;
- worker: rank 2 forks a worker (which inherits RANK=2) while a thread of rank 2 holds a lock; the worker's only
  thread waits for that lock forever, and rank 2 waits for the worker's result;
- spin: rank 2 waits for rank 3's signal (a subgroup's wait of its own), and rank 3 spins in a Python loop and never
  gives it: rank 3 is where the job stopped, rank 2 only waits for it;
- dead: rank 2 exits with status 3; the launcher, joining rank 0 first, has not reaped it.
"""
import ctypes
import fcntl
import multiprocessing
import os
import sys
import threading
import time

from ready import ready

STUCK = 2


def lock_twice():
    libc = ctypes.CDLL(None, use_errno=True)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER, a normal (non-recursive) mutex
    libc.pthread_mutex_lock(mutex)
    ready("rank2")
    libc.pthread_mutex_lock(mutex)  # HANG mutex


def wait_for_file_lock(path):
    with open(path, "a") as held:
        ready("rank2")
        fcntl.lockf(held, fcntl.LOCK_EX)  # HANG flock


def worker_main(lock, results):
    ready("worker")
    with lock:  # HANG worker
        results.put("batch")


def wait_for_a_worker():
    lock = threading.Lock()
    taken, release = threading.Event(), threading.Event()

    def hold():
        with lock:
            taken.set()
            release.wait()

    threading.Thread(target=hold, daemon=True).start()
    taken.wait()
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    fork.Process(target=worker_main, args=(lock, results), daemon=True).start()  # forks with the lock held
    release.set()
    ready("rank2")
    results.get()  # HANG waits_for_worker


def wait_for_partner(partner):
    ready("rank2")
    partner.wait()  # HANG partner


def spin():
    ready("rank3")
    total = 0
    while True:  # HANG spin
        total += 1


def exit_early():
    ready("rank2")
    os._exit(3)  # HANG dead


def rank_main(scenario, barrier, path, partner):
    os.environ["HUNG_READY_FD"] = str(os.open(os.environ["HUNG_READY_PATH"], os.O_WRONLY))
    rank = int(os.environ["RANK"])
    if scenario == "spin" and rank in (STUCK, STUCK + 1):
        wait_for_partner(partner) if rank == STUCK else spin()
    if rank == STUCK:
        {"mutex": lock_twice, "flock": lambda: wait_for_file_lock(path), "worker": wait_for_a_worker,
         "dead": exit_early}[scenario]()
    ready(f"rank{rank}")
    barrier.wait()  # HANG barrier


if __name__ == "__main__":
    scenario, path = sys.argv[1], sys.argv[2]
    spawn = multiprocessing.get_context("spawn")  # each rank execs a fresh interpreter, as a launcher's do
    barrier, partner = spawn.Barrier(4), spawn.Event()
    os.environ["HUNG_READY_PATH"] = f"/proc/{os.getpid()}/fd/{os.environ['HUNG_READY_FD']}"
    os.environ["WORLD_SIZE"] = "4"
    with open(path, "a") as held:
        if scenario == "flock":
            fcntl.lockf(held, fcntl.LOCK_EX)
        ranks = []
        for rank in range(4):
            os.environ["RANK"] = str(rank)
            ranks.append(spawn.Process(target=rank_main, args=(scenario, barrier, path, partner)))
            ranks[-1].start()
        ready("parent")
        for process in ranks:
            process.join()  # HANG parent
            time.sleep(0.01)
