"""Four worker processes and a barrier of four: rank 2 never arrives, the other three wait in it."""
import multiprocessing
import time

from ready import ready

SLEEPER = 2


def never_arrives():
    time.sleep(3600)  # HANG sleeper


def worker(rank, barrier):
    ready(f"rank{rank}")
    if rank == SLEEPER:
        never_arrives()  # HANG never_arrives
    barrier.wait()  # HANG waiter


if __name__ == "__main__":
    fork = multiprocessing.get_context("fork")  # the children inherit the ready pipe
    barrier = fork.Barrier(4)
    workers = [fork.Process(target=worker, args=(rank, barrier)) for rank in range(4)]
    for process in workers:
        process.start()
    ready("parent")
    for process in workers:
        process.join()  # HANG parent
