"""Mutated real inputs: every parser must shrug off truncation, junk bytes and shuffled lines."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from postmortem.inputs import Blob
from postmortem.pipeline import analyze_blobs
from postmortem.reader import BytesReader

DATA = Path(__file__).parent / "data"
REAL = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix != ".md")


def mutate(rng: random.Random, data: bytes, other: bytes) -> bytes:
    """One of the damages real attachments show: cut, corrupted, spliced, reordered, re-wrapped."""
    buf = bytearray(data)
    how = rng.randrange(5)
    if how == 0:
        return bytes(buf[: rng.randrange(len(buf) + 1)])
    if how == 1:
        for _ in range(rng.randrange(1, 30)):
            if buf:
                buf[rng.randrange(len(buf))] = rng.randrange(256)
        return bytes(buf)
    if how == 2:
        return bytes(buf[: rng.randrange(len(buf) + 1)]) + other[rng.randrange(len(other) + 1) :]
    if how == 3:
        lines = data.split(b"\n")
        rng.shuffle(lines)
        return b"\n".join(lines[: rng.randrange(len(lines) + 1)])
    for _ in range(12):
        at = rng.randrange(len(buf) + 1)
        buf[at:at] = b"\n"
    return bytes(buf)


@pytest.mark.parametrize("seed", range(8))
def test_parsers_survive_damaged_real_inputs(seed):
    rng = random.Random(seed)
    originals = [p.read_bytes() for p in REAL]
    for i in range(150):
        damaged = mutate(rng, rng.choice(originals), rng.choice(originals))
        report = analyze_blobs([Blob(f"damaged-{seed}-{i}", BytesReader(damaged))])
        failures = [d for d in report.inputs[0].diagnostics if "parser failed" in d]
        assert not failures, (failures, damaged[:2000])
