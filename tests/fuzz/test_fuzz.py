"""Each parser fuzzed from its real seeds (hypothesis), plus every committed regression input replayed.

CI runs the "ci" profile: a fixed, derandomised budget per target, so a red run
is a real finding that reproduces. By hand, explore for longer:

    HYPOTHESIS_PROFILE=long POSTMORTEM_FUZZ_SAVE=1 .venv/bin/python -m pytest tests/fuzz -x

Every input that breaks a target is then written to tests/fuzz/regressions/<target>/
(POSTMORTEM_FUZZ_SAVE=1): commit it with the fix, and `test_regression_inputs` keeps it fixed.
"""

from __future__ import annotations

import hashlib
import os
import random
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from .targets import REGRESSIONS, TARGETS, Target, time_bound

settings.register_profile("ci", max_examples=1000, deadline=None, derandomize=True, database=None,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("long", max_examples=20_000, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

MAX_INPUT = 4 << 20
"""Largest mutated input (the seeds are small real files; a splice of two stays well under this)."""


@cache
def seeds(name: str) -> tuple[bytes, ...]:
    target = next(t for t in TARGETS if t.name == name)
    return tuple(target.seeds()) or (b"",)


@st.composite
def mutated(draw, name: str) -> bytes:
    """A real seed damaged the ways attachments and attackers damage files: cut, flipped, spliced, grown, zeroed."""
    pool = seeds(name)
    data = bytearray(draw(st.sampled_from(pool)))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.integers(0, 6))
        at = rng.randrange(len(data) + 1)
        if how == 0:
            del data[at:]
        elif how == 1:
            for _ in range(rng.randrange(1, 32)):
                if data:
                    data[rng.randrange(len(data))] = rng.randrange(256)
        elif how == 2:
            other = rng.choice(pool)
            data[at:] = other[rng.randrange(len(other) + 1):]
        elif how == 3:
            data[at:at] = draw(st.binary(max_size=64))
        elif how == 4 and data:  # an integer field set to an extreme (sizes, offsets, counts)
            data[at:at + 8] = rng.choice([b"\xff" * 8, b"\x00" * 8, b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80"])
        elif how == 5 and data:  # a slice repeated (storms, duplicated headers)
            piece = bytes(data[at:at + rng.randrange(1, 512)])
            data[at:at] = piece * rng.randrange(1, 64)
        elif how == 6:
            data[at:at] = draw(st.sampled_from([b"\r", b"\x00", b"\n" * 3, "\u202e".encode(), b"\xff\xfe", b"\x1b[2J"]))
    return bytes(data[:MAX_INPUT])


def _check(target: Target, data: bytes) -> None:
    try:
        with time_bound():
            target.run(data)
    except Exception:
        if os.environ.get("POSTMORTEM_FUZZ_SAVE"):
            folder = REGRESSIONS / target.name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{hashlib.sha1(data).hexdigest()[:16]}.bin").write_bytes(data)
        raise


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_fuzz(target: Target):
    @given(mutated(target.name))
    def run(data: bytes) -> None:
        _check(target, data)

    run()


def _regressions() -> list[tuple[Target, os.PathLike]]:
    found = []
    for target in TARGETS:
        folder = REGRESSIONS / target.name
        if folder.is_dir():
            found += [(target, path) for path in sorted(folder.iterdir())]
    return found


@pytest.mark.parametrize(("target", "path"), _regressions(), ids=lambda v: getattr(v, "name", str(v)))
def test_regression_inputs(target: Target, path):
    _check(target, path.read_bytes())


def test_every_target_has_real_seeds():
    for target in TARGETS:
        assert seeds(target.name) != (b"",), target.name
