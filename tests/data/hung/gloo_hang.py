"""A 4-rank Gloo job on CPU in which rank 2 never calls the all_reduce the other ranks wait in."""
import datetime
import multiprocessing
import sys
import time

from ready import ready

SKIPPER = 2


def skips_the_collective():
    time.sleep(3600)  # HANG skipper


def rank_main(rank, store):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=4,
                            timeout=datetime.timedelta(hours=1))  # long: the job stays hung
    tensor = torch.ones(4)
    ready(f"rank{rank}")
    if rank == SKIPPER:
        skips_the_collective()  # HANG skips
    dist.all_reduce(tensor)  # HANG all_reduce


if __name__ == "__main__":
    fork = multiprocessing.get_context("fork")  # the children inherit the ready pipe
    ranks = [fork.Process(target=rank_main, args=(rank, sys.argv[1])) for rank in range(4)]
    for process in ranks:
        process.start()
    ready("parent")
    for process in ranks:
        process.join()  # HANG parent
