"""postmortem's safe pickle reader against pickle.loads, on a flight-recorder dump grown to a given size.

`python3 benchmarks/bench_safe_pickle.py [--dump FILE] [--megabytes 1] [--runs 5]` reads a real dump
written by PyTorch (by default one committed under tests/data/flight_recorder), repeats its entries
until the pickle is about --megabytes, pickles that with protocols 2 (as torch writes) and 4, and times
`postmortem.safe_pickle.loads` and `pickle.loads` on it (best of --runs). The script stops unless both
give the same result. pickle.loads is safe here: safe_pickle read the dump first, so it holds no code.
"""

from __future__ import annotations

import argparse
import copy
import pickle
import pickletools
import time
from collections.abc import Callable
from pathlib import Path

from postmortem.safe_pickle import loads

DEFAULT_DUMP = Path(__file__).parent.parent / "tests/data/flight_recorder/skip/nccl_trace_rank_0"


def grown(dump: dict[str, object], megabytes: float, protocol: int) -> bytes:
    """The dump with its entries repeated (copies, so the pickler cannot share them) to about `megabytes`."""
    entries = dump["entries"]
    assert isinstance(entries, list) and entries, "the dump has no entries to repeat"
    while True:
        data = pickle.dumps({**dump, "entries": entries}, protocol=protocol)
        if len(data) >= megabytes * 1e6:
            return data
        entries = entries + copy.deepcopy(entries)


def best(runs: int, decode: Callable[[bytes], object], data: bytes) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        decode(data)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, default=DEFAULT_DUMP)
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    dump = loads(args.dump.read_bytes())
    assert isinstance(dump, dict), f"{args.dump} is not a flight-recorder dump"
    for protocol in (2, 4):
        data = grown(dump, args.megabytes, protocol)
        assert pickle.dumps(loads(data), protocol=5) == pickle.dumps(pickle.loads(data), protocol=5)
        opcodes = sum(1 for _ in pickletools.genops(data))
        ours, theirs = best(args.runs, loads, data), best(args.runs, pickle.loads, data)
        print(
            f"protocol {protocol}: {len(data) / 1e6:.2f} MB, {opcodes:,} opcodes: safe_pickle {ours * 1e3:.0f} ms"
            f" ({ours / opcodes * 1e9:.0f} ns/opcode), pickle.loads {theirs * 1e3:.1f} ms ({ours / theirs:.0f}x)"
        )


if __name__ == "__main__":
    main()
