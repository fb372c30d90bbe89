"""The user cache (issue 28): what start-up would rebuild every run is kept, and nothing kept is trusted -- a damaged,
planted or foreign entry is rebuilt, the same answer comes out, and a cache that cannot be written costs only time."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from postmortem import prefilter, user_cache
from postmortem.signatures import default_directory, load_checked

ROOT = Path(__file__).resolve().parent.parent
XID_79 = ("[  100.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the "
          "bus.\n")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(user_cache.ENV, str(folder))
    return folder


def _verdict(log: Path, cache: str) -> tuple[str, str]:
    """`postmortem --cache CACHE analyze LOG` in a fresh interpreter: the first cause, and what it printed on stderr."""
    done = subprocess.run([sys.executable, "-m", "postmortem", "--cache", cache, "analyze", "--format", "json",
                           str(log)], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["findings"][0]["cause"], done.stderr


def test_an_entry_reads_back_only_as_written(cache_dir):
    entry = user_cache.key("some", b"input")
    assert user_cache.read("probe", entry) is None
    user_cache.write("probe", entry, b"payload")
    assert user_cache.read("probe", entry) == b"payload"
    assert oct(cache_dir.stat().st_mode & 0o777) == "0o700"
    assert user_cache.key("some", b"input") != user_cache.key("some", b"input2")
    assert user_cache.key("ab", "c") != user_cache.key("a", "bc")  # parts are delimited, not concatenated


def test_a_damaged_planted_or_shared_entry_is_not_read(cache_dir):
    entry = user_cache.key("x")
    user_cache.write("probe", entry, b"payload")
    path = next(cache_dir.glob("probe-*"))
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # a flipped bit: the digest no longer matches
    path.write_bytes(bytes(data))
    assert user_cache.read("probe", entry) is None
    user_cache.write("probe", entry, b"payload")
    path.chmod(0o666)  # anyone may write it: whatever it holds is not ours
    assert user_cache.read("probe", entry) is None
    path.unlink()
    (cache_dir / "elsewhere").write_bytes(b"not a cache entry")
    path.symlink_to(cache_dir / "elsewhere")  # a link planted in its place is not followed
    assert user_cache.read("probe", entry) is None
    path.unlink()
    user_cache.write("probe", entry, b"payload")
    cache_dir.chmod(0o777)  # a folder others may write: entries can be swapped under us
    try:
        assert user_cache.read("probe", entry) is None
    finally:
        cache_dir.chmod(0o700)


def test_a_fifo_in_an_entrys_place_is_not_waited_on_and_deep_json_is_not_followed(cache_dir):
    entry = user_cache.key("fifo")
    user_cache.write("probe", entry, b"payload")
    path = next(cache_dir.glob("probe-*"))
    path.unlink()
    os.mkfifo(path, 0o600)  # a reader that opened it blocking would wait for a writer forever
    assert user_cache.read("probe", entry) is None
    deep = b"[" * 100_000 + b"]" * 100_000
    user_cache.write("probe", "deep", deep)
    assert user_cache.read("probe", "deep") == deep and user_cache.read_json("probe", "deep") is None


def test_a_kept_yaml_file_that_is_no_mapping_is_parsed_again(cache_dir, tmp_path):
    source = tmp_path / "words.yaml"
    source.write_text("title: a heading\n", encoding="utf-8")
    assert user_cache.parsed_yaml(source) == {"title": "a heading"}
    user_cache.write("yaml", user_cache.key(source.name, source.read_bytes()), b"[1, 2]")
    assert user_cache.parsed_yaml(source) == {"title": "a heading"}


def test_off_keeps_nothing_and_an_unwritable_cache_costs_only_time(tmp_path, monkeypatch):
    monkeypatch.setenv(user_cache.ENV, "off")
    user_cache.write("probe", "k", b"payload")
    assert user_cache.directory() is None and user_cache.read("probe", "k") is None
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x")
    monkeypatch.setenv(user_cache.ENV, str(blocked / "cache"))
    user_cache.write("probe", "k", b"payload")  # cannot make the folder: nothing raised
    assert user_cache.read("probe", "k") is None


def test_signatures_from_the_cache_are_the_signatures_from_the_yaml(cache_dir):
    first, flaws = load_checked(default_directory())
    assert not flaws and list(cache_dir.glob("signatures-*"))
    second, flaws = load_checked(default_directory())
    assert not flaws
    assert [s.id for s in second.signatures] == [s.id for s in first.signatures]
    assert [s.match for s in second.signatures] == [s.match for s in first.signatures]
    assert [(s.origin, dict(s.lines)) for s in second.signatures] == [(s.origin, dict(s.lines))
                                                                      for s in first.signatures]
    assert second.version == first.version and second.causes == first.causes


def test_a_planted_signature_entry_is_checked_like_yaml(cache_dir):
    """An entry of the right shape whose first signature was rewritten: checked as YAML is, found unsound, and the
    files are read again; one of the wrong shape is not used at all."""
    real, _ = load_checked(default_directory())
    path = next(cache_dir.glob("signatures-*"))
    entry = path.name.split("-", 1)[1]
    kept = user_cache.read_json("signatures", entry)
    first = next(document for document in kept["documents"] if document.get("signatures"))
    first["signatures"][0] = {**first["signatures"][0], "id": "planted", "match": {"no-such-key": 1}}
    user_cache.write("signatures", entry, json.dumps(kept).encode())
    database, flaws = load_checked(default_directory())
    assert not flaws and "planted" not in {s.id for s in database.signatures}
    assert [s.id for s in database.signatures] == [s.id for s in real.signatures]
    user_cache.write("signatures", entry, json.dumps({"documents": [{}], "lines": [[]]}).encode())
    assert [s.id for s in load_checked(default_directory())[0].signatures] == [s.id for s in real.signatures]


def test_the_same_verdict_with_a_cold_a_warm_and_a_damaged_cache(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(XID_79, encoding="utf-8")
    folder = tmp_path / "cache"
    assert _verdict(log, "off")[0] == "gpu-off-bus"
    assert _verdict(log, str(folder))[0] == "gpu-off-bus"  # cold: built and written
    kinds = {p.name.split("-")[0] for p in folder.iterdir()}
    assert "signatures" in kinds and ("hyperscan" in kinds or prefilter.hyperscan is None), kinds
    assert _verdict(log, str(folder))[0] == "gpu-off-bus"  # warm
    for entry in folder.iterdir():  # every entry replaced by junk with a valid digest: still the same answer
        payload = os.urandom(4096)
        entry.write_bytes(user_cache.MAGIC + hashlib.sha256(payload).digest() + payload)
    cause, stderr = _verdict(log, str(folder))
    assert cause == "gpu-off-bus" and "Traceback" not in stderr
