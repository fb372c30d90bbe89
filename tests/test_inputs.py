"""Opening inputs: compression, archives, stdin, encodings and hostile bytes."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import random
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard

from postmortem import inputs, text
from postmortem.inputs import open_inputs
from postmortem.pipeline import analyze
from postmortem.prefilter import Prefilter
from postmortem.reader import BytesReader
from postmortem.text import TextDoc

DATA = Path(__file__).parent / "data" / "inputs"
OFFBUS = (DATA / "offbus-dmesg.txt").read_bytes()


def kinds(report) -> list[str]:
    return sorted(e.kind for e in report.events)


@pytest.fixture
def plain_report():
    return analyze([str(DATA / "offbus-dmesg.txt")])


@pytest.mark.parametrize(
    "compress",
    [gzip.compress, lzma.compress, bz2.compress, lambda b: zstandard.ZstdCompressor().compress(b)],
    ids=["gzip", "xz", "bzip2", "zstd"],
)
def test_compressed_file_reads_like_plain(tmp_path, plain_report, compress):
    path = tmp_path / "kern.log.weird-name"  # sniffed by content, not by name
    path.write_bytes(compress(OFFBUS))
    report = analyze([str(path)])
    assert plain_report.events, "the plain file must produce events for this test to mean anything"
    assert kinds(report) == kinds(plain_report)
    assert [e.where.line for e in report.events] == [e.where.line for e in plain_report.events]
    assert report.inputs[0].path == str(path)


def _tarball(path: Path, members: dict[str, bytes], mode: str = "w:gz") -> None:
    with tarfile.open(path, mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def test_tar_members_are_named_with_bang_path(tmp_path, plain_report):
    bundle = tmp_path / "bundle.tar.gz"
    _tarball(bundle, {"var/log/kern.log": OFFBUS, "notes.txt": b"nothing here\n"})
    report = analyze([str(bundle)])
    paths = [i.path for i in report.inputs]
    assert paths == [f"{bundle}!/var/log/kern.log", f"{bundle}!/notes.txt"]
    assert {e.where.path for e in report.events} == {f"{bundle}!/var/log/kern.log"}
    assert kinds(report) == kinds(plain_report)


def test_zip_and_nested_archive(tmp_path, plain_report):
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("logs/dmesg.txt", OFFBUS)
    outer = tmp_path / "report.tar"
    _tarball(outer, {"attachments/logs.zip": inner.getvalue()}, mode="w")
    report = analyze([str(outer)])
    assert report.inputs[0].path == f"{outer}!/attachments/logs.zip!/logs/dmesg.txt"
    assert kinds(report) == kinds(plain_report)


def test_archive_links_and_dotdot_names_never_touch_disk(tmp_path):
    bundle = tmp_path / "evil.tar"
    with tarfile.open(bundle, "w") as archive:
        info = tarfile.TarInfo("../../escape.txt")
        info.size = len(OFFBUS)
        archive.addfile(info, io.BytesIO(OFFBUS))
        link = tarfile.TarInfo("passwd")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        archive.addfile(link)
    before = set(os.listdir(tmp_path.parent))
    report = analyze([str(bundle)])
    assert set(os.listdir(tmp_path.parent)) == before
    by_path = {i.path: i for i in report.inputs}
    assert f"{bundle}!/passwd" in by_path
    assert "link" in by_path[f"{bundle}!/passwd"].diagnostics[0]
    assert report.events  # the ../ member is still read, in memory


def test_decompression_stops_at_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "MAX_MEMBER", 1024 * 1024)
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (20 * 1024 * 1024)))
    report = analyze([str(bomb)])
    info = report.inputs[0]
    assert info.size == 1024 * 1024
    assert any("cut at" in d for d in info.diagnostics)


def test_truncated_gzip_is_a_diagnostic(tmp_path):
    broken = tmp_path / "kern.log.gz"
    broken.write_bytes(gzip.compress(OFFBUS)[:40])
    report = analyze([str(broken)])
    assert report.inputs[0].format == "unreadable"
    assert "decompress" in report.inputs[0].diagnostics[0]


def test_nesting_depth_is_bounded(tmp_path, monkeypatch):
    data = OFFBUS
    for _ in range(inputs.MAX_DEPTH + 2):
        data = gzip.compress(data)
    path = tmp_path / "deep.gz"
    path.write_bytes(data)
    report = analyze([str(path)])
    assert "nested" in report.inputs[0].diagnostics[-1]


@pytest.mark.parametrize(
    ("name", "content", "diagnostic"),
    [
        ("empty.log", b"", "empty"),
        ("junk.bin", random.Random(7).randbytes(200_000), "binary"),
    ],
)
def test_hostile_inputs_give_a_diagnostic(tmp_path, name, content, diagnostic):
    path = tmp_path / name
    path.write_bytes(content)
    report = analyze([str(path)])
    assert any(diagnostic in d for d in report.inputs[0].diagnostics)


def test_one_bad_input_does_not_stop_the_others(tmp_path, plain_report):
    junk = tmp_path / "junk.gz"
    junk.write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    report = analyze([str(junk), str(DATA / "offbus-dmesg.txt")])
    assert report.inputs[0].format == "unreadable"
    assert kinds(report) == kinds(plain_report)


def test_undecodable_and_utf16_text(tmp_path, plain_report):
    latin = tmp_path / "latin.log"
    latin.write_bytes(b"caf\xe9 \xff\xfe broken\n" + OFFBUS)
    utf16 = tmp_path / "powershell.log"
    utf16.write_bytes(b"\xff\xfe" + OFFBUS.decode("utf-8").encode("utf-16-le"))
    for path in (latin, utf16):
        report = analyze([str(path)])
        assert kinds(report) == kinds(plain_report), path.name


def test_gb18030_lines_decode(tmp_path):
    chinese = "环境：5090\n报错：\n".encode("gb18030") * 20
    path = tmp_path / "gbk.log"
    path.write_bytes(chinese + OFFBUS)
    head = path.read_bytes()[:65536]
    assert text.detect_encoding(head) == "gb18030"
    assert analyze([str(path)]).events


def test_a_50_mb_single_line_is_read(tmp_path):
    path = tmp_path / "one-line.log"
    line = OFFBUS.splitlines()[0]
    with open(path, "wb") as handle:
        handle.write(b"x" * (50 * 1024 * 1024))
        handle.write(b" " + line)
    report = analyze([str(path)])
    assert report.inputs[0].size > 50 * 1024 * 1024
    assert report.events, "the anchor at the end of a huge line must still be found"
    assert all(len(e.text) <= text.MAX_LINE + 1 for e in report.events)


def test_line_numbers_survive_window_boundaries(monkeypatch):
    monkeypatch.setattr(text, "WINDOW", 64)
    body = b"".join(b"noise line %d\n" % i if i % 7 else b"ANCHOR at %d\n" % i for i in range(200))
    doc = TextDoc(BytesReader(body), "t")
    lines = doc.scan(Prefilter({"g": [b"ANCHOR"]}))
    expected = [i + 1 for i in range(200) if i % 7 == 0]
    assert [line.number for line in lines] == expected
    assert all(line.text == f"ANCHOR at {line.number - 1}" for line in lines)


def test_python_fallback_finds_what_hyperscan_finds():
    rng = random.Random(3)
    alphabet = b"abcNVRM: Xid\n"
    data = bytes(rng.choice(alphabet) for _ in range(100_000))
    groups = {"a": [b"NVRM", b"Xid"], "b": [b"Xid", b"ab"]}
    fast, slow = Prefilter(groups), Prefilter(groups, use_hyperscan=False)
    assert slow.engine == "python"
    assert fast.matches(data) == slow.matches(data)


def test_directories_are_walked_in_order(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.log").write_bytes(OFFBUS)
    (tmp_path / "a.log").write_bytes(b"hello\n")
    assert [blob.path for blob in open_inputs([str(tmp_path)])] == [
        str(tmp_path / "a.log"),
        str(tmp_path / "b" / "z.log"),
    ]


def test_a_log_made_only_of_errors_is_bounded(tmp_path, monkeypatch):
    from postmortem import pipeline

    monkeypatch.setattr(pipeline, "MAX_CANDIDATES", 50)
    path = tmp_path / "flood.log"
    path.write_bytes(OFFBUS * 40)
    report = analyze([str(path)])
    assert any("only the first 50 were parsed" in d for d in report.inputs[0].diagnostics)
    assert max(e.where.line for e in report.events) <= 50
