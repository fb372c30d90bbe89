"""Items 3 and 13: a flight-recorder pickle that names one big string from every frame of every entry, and dumps
each holding one absurd value among good ones.

The attack is the real dump of rank 0 of tests/data/flight_recorder/sleep, its entries grown to the recorder's
default 2,000 and each given the same 200 frames whose function name is one 8 MiB string: pickle writes the
string once and a two-byte BINGET for every later use, so the file is about 8.5 MB, far under the object-count
limit, while reading every frame as text would build 400,000 copies (3.2 TB). The other ranks' real dumps sit
beside it: their conclusion (rank 3 missing from seq 5) must still be reached.

Item 13's archive holds the same job's JSON dumps: rank 0's with one more entry whose sequence number is JSON's
`Infinity` and one whose is a 20,000-bit number, rank 1's under a member name whose rank has 5,000 digits. Each
bad entry is dropped alone and the dump with the unusable rank is still read: rank 0 is still lined up.
"""

from __future__ import annotations

import io
import json
import pickle
import shutil
import tarfile
from pathlib import Path

from postmortem.safe_pickle import loads

from .harness import Hostile, Run

MiB = 1024 * 1024
DATA = Path(__file__).parent.parent / "data" / "flight_recorder" / "sleep"
ENTRIES, FRAMES = 2_000, 200


def shared_string_dump(big: int) -> bytes:
    """Rank 0's real dump, its first entry repeated ENTRIES times with FRAMES frames all named by one `big`-byte
    string (protocol 2, as the recorder writes: the string once, then a memo reference per frame)."""
    dump = loads((DATA / "nccl_trace_rank_0").read_bytes())
    assert isinstance(dump, dict)
    name = "f" * big
    frames = [{"name": name, "filename": "/src/train.py", "line": line} for line in range(FRAMES)]
    first = dump["entries"][0]
    dump["entries"] = [{**first, "collective_seq_id": seq, "record_id": seq, "frames": frames}
                       for seq in range(1, ENTRIES + 1)]
    return pickle.dumps(dump, protocol=2)


def _shared_8mib_string(directory: Path) -> Run:
    for rank in (1, 2, 3):
        shutil.copy(DATA / f"nccl_trace_rank_{rank}", directory)
    (directory / "nccl_trace_rank_0").write_bytes(shared_string_dump(8 * MiB))
    return Run(["analyze", ".", "--no-color"],
               evidence=("rank 3 parted from ranks 1-2", "nccl_trace_rank_0", "through shared references"))


def _absurd_values_in_a_tar(directory: Path) -> Run:
    with tarfile.open(directory / "dumps.tar", "w", format=tarfile.PAX_FORMAT) as archive:
        for rank in range(4):
            dump = json.loads((DATA / f"fr_json_rank_{rank}.json").read_text())
            name = f"dumps/fr_json_rank_{rank}.json" if rank != 1 else f"dumps/fr_json_rank_{'7' * 5_000}.json"
            if rank == 0:
                dump["entries"] += [{**dump["entries"][0], "collective_seq_id": f"@{bad}@"}
                                    for bad in ("Infinity", "9" * 6_021)]
            text = _bare_numbers(json.dumps(dump)).encode()
            member = tarfile.TarInfo(name)
            member.size = len(text)
            archive.addfile(member, io.BytesIO(text))
    return Run(["analyze", "dumps.tar", "--no-color"],
               evidence=("ranks 0, 2 entered all_reduce", "2 flight-recorder entries of rank 0 dropped",
                         "a rank of 5,000 digits"))


def _bare_numbers(text: str) -> str:
    """JSON text with each "@...@" string written as the bare number it holds (json.dumps will not write them)."""
    return text.replace('"@', "").replace('@"', "")


# Bounds: 3x the wall time and 2x the smallest RLIMIT_AS tried (both passed under 128 MiB) on a loaded 2-core VM
# (min 5 s): the big string 0.6-1.7 s, 66 MiB RSS; the tar 1.4 s, 43 MiB. Before the fix the reader of the big
# string grew to any bound given it (1 GiB in 3.4 s, 4 GiB in 11 s: MemoryError, rank 0 lost) and, unbounded, to
# 22 GB and the OOM killer; the tar lost rank 0's dump (a parser failure on Infinity) and rank 1's (int() of
# 5,000 digits).
CASES = [
    Hostile(3, "flight-recorder-pickle-sharing-an-8mib-string", _shared_8mib_string, wall_s=5,
            address_space=256 * MiB),
    Hostile(13, "flight-recorder-dumps-with-an-infinite-seq-a-20000-bit-seq-a-5000-digit-rank",
            _absurd_values_in_a_tar, wall_s=5, address_space=256 * MiB),
]
