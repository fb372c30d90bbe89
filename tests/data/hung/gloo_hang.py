"""A 4-rank Gloo job on CPU in which rank 2 never calls the all_reduce the other ranks wait in: it sleeps, or (argv[2]
`all_gather`) it calls another collective, all_gather, where the others call all_reduce."""
import datetime
import multiprocessing
import sys
import time

from ready import ready

SKIPPER = 2


def skips_the_collective():
    time.sleep(3600)  # HANG skipper


def gathers_instead(tensor):
    import torch
    import torch.distributed as dist

    dist.all_gather([torch.empty(4) for _ in range(4)], tensor)  # HANG all_gather


def rank_main(rank, store, scenario):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=4,
                            timeout=datetime.timedelta(hours=1))  # long: the job stays hung
    tensor = torch.ones(4)
    ready(f"rank{rank}")
    if rank == SKIPPER and scenario == "all_gather":
        gathers_instead(tensor)  # HANG gathers
    elif rank == SKIPPER:
        skips_the_collective()  # HANG skips
    dist.all_reduce(tensor)  # HANG all_reduce


if __name__ == "__main__":
    fork = multiprocessing.get_context("fork")  # the children inherit the ready pipe
    scenario = sys.argv[2] if len(sys.argv) > 2 else "sleep"
    ranks = [fork.Process(target=rank_main, args=(rank, sys.argv[1], scenario)) for rank in range(4)]
    for process in ranks:
        process.start()
    ready("parent")
    for process in ranks:
        process.join()  # HANG parent
