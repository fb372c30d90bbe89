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
from dataclasses import dataclass
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


@pytest.mark.parametrize("log", [DATA / "offbus-dmesg.txt",
                                 Path(__file__).parent / "corpus" / "drv-xid119-gsp-rpc-525-01" / "dmesg-T.txt"],
                         ids=["offbus", "xid119"])
def test_ff_fe_without_nul_bytes_is_not_utf16(tmp_path, log):
    """Junk that starts with a UTF-16 byte-order mark, then a real kernel log: read as the bytes it is,
    every event of the log kept (taken for UTF-16, it decoded into CJK noise and lost them all)."""
    path = tmp_path / "junk-first.log"
    path.write_bytes(b"\xff\xfe junk\n" + log.read_bytes())
    expected = [(e.kind, e.fields.get("xid")) for e in analyze([str(log)]).events]
    assert expected and [(e.kind, e.fields.get("xid")) for e in analyze([str(path)]).events] == expected


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


# ------------------------------------------------------------------ issue 13: budgets, damaged members, resync

XID = b"[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
MiB = 1024 * 1024


@pytest.fixture
def small_budgets(monkeypatch):
    """The unpacking bounds scaled down 256-fold, so that budgets bite on megabytes instead of gigabytes."""
    for name, value in {"MAX_MEMBER": 8 * MiB, "INPUT_BUDGET": 16 * MiB, "RUN_BUDGET": 40 * MiB,
                        "RESERVE": 2 * MiB}.items():
        monkeypatch.setattr(inputs, name, value)


def _tar_of(path: Path, members: list[tuple[str, bytes]], mode: str = "w") -> None:
    with tarfile.open(path, mode) as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


@dataclass
class Opened:
    """A blob as read while open_inputs still holds its file: size, head and diagnostics."""

    size: int | None
    head: bytes | None
    diagnostics: list[str]


def opened(paths: list[str]) -> dict[str, Opened]:
    """Each blob by its member name (the part after the last `!/`)."""
    return {blob.path.split("!/")[-1]: Opened(blob.reader and blob.reader.size, blob.reader and
                                              blob.reader.read_at(0, 200), blob.diagnostics)
            for blob in open_inputs(paths)}


def test_streams_of_unknown_size_share_one_budget_per_input_and_keep_the_reserve(tmp_path, small_budgets):
    bomb = gzip.compress(bytes(20 * MiB))
    bundle = tmp_path / "bundle.tar"
    _tar_of(bundle, [("a.gz", bomb), ("b.gz", bomb), ("c.gz", bomb), ("d.gz", bomb),
                     ("var/log/dmesg.txt", XID), ("kern.log.gz", gzip.compress(XID))])
    blobs = opened([str(bundle)])
    sizes = [blobs[name].size for name in ("a.gz", "b.gz", "c.gz", "d.gz")]
    assert sizes == [8 * MiB, 6 * MiB, 1 * MiB, MiB // 2]  # MAX_MEMBER, all but the reserve, then halves of it
    assert "most read of one member" in blobs["a.gz"].diagnostics[0]
    assert "6.0 MiB was its share of the 8.0 MiB left of the 16.0 MiB this input may unpack" in \
        blobs["b.gz"].diagnostics[0]
    assert sum(blob.size for name, blob in blobs.items() if name.endswith(".gz")) <= 16 * MiB
    assert blobs["var/log/dmesg.txt"].head == XID
    assert blobs["kern.log.gz"].head == XID  # a small stream still fits in what the bombs left


def test_the_run_budget_spans_inputs(tmp_path, small_budgets, monkeypatch):
    monkeypatch.setattr(inputs, "RUN_BUDGET", 12 * MiB)
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"kern{i}.log.gz")
        paths[-1].write_bytes(gzip.compress(bytes(20 * MiB)))
    blobs = list(open_inputs([str(p) for p in paths]))
    assert [b.reader.size for b in blobs] == [8 * MiB, 2 * MiB, 1 * MiB]  # the run's 12 MiB, less its reserve
    assert "this run may unpack" in blobs[1].diagnostics[0]


def test_a_member_claiming_more_than_the_budget_is_skipped_unread(tmp_path, small_budgets, monkeypatch):
    bundle = tmp_path / "bundle.zip"
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("huge.bin", bytes(17 * MiB))
        archive.writestr("dmesg.txt", XID)
    read = []
    real_spool = inputs.spool
    monkeypatch.setattr(inputs, "spool", lambda stream, limit, errors=(): read.append(limit) or real_spool(
        stream, limit, errors))
    report = analyze([str(bundle)])
    assert read == [len(XID)]  # only dmesg.txt was inflated
    assert "Xid" in {e.fields.get("kind", e.kind) for e in report.events} or report.events
    skipped = [d for i in report.inputs for d in i.diagnostics if "skipped unread" in d]
    assert skipped and "huge.bin, 17.0 MiB" in skipped[0] and "left of the 16.0 MiB" in skipped[0]


def test_overlapping_zip_entries_are_refused_and_the_rest_is_read(tmp_path):
    from hostile.cases_archives import write_zip_bomb

    bomb = tmp_path / "bomb.zip"
    write_zip_bomb(bomb, 3, 4 * MiB, {"dmesg.txt": XID})
    blobs = list(open_inputs([str(bomb)]))
    assert [b.path for b in blobs if b.reader] == [f"{bomb}!/dmesg.txt"]
    assert any("3 member(s) skipped unread: their bytes overlap" in d for b in blobs for d in b.diagnostics)


def test_entries_are_counted_per_input_with_one_diagnostic(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "MAX_MEMBERS", 50)
    bundle = tmp_path / "many.tar"
    _tar_of(bundle, [(f"d/{i}.txt", b"x\n") for i in range(200)])
    blobs = list(open_inputs([str(bundle)]))
    assert len([b for b in blobs if b.reader]) == 50
    assert [d for b in blobs for d in b.diagnostics] == [
        "more than 50 archive entries in this input; the other 150 skipped unread"]


def test_an_archive_cut_at_its_entry_budget_says_how_many_entries_were_skipped(tmp_path, monkeypatch):
    """Round 3, item 16a: past MAX_MEMBERS the diagnostic names the entries not walked (the tar's counted by
    hopping header to header, PAX and long-name headers not counted as members)."""
    monkeypatch.setattr(inputs, "MAX_MEMBERS", 10)
    long_names = [(f"{'d' * 120}/{i}.txt", b"x\n") for i in range(30)]  # GNU long-name headers before each
    _tar_of(tmp_path / "many.tar", [(f"{i}.txt", b"x\n" * i) for i in range(20)] + long_names)
    with zipfile.ZipFile(tmp_path / "many.zip", "w") as archive:
        for i in range(25):
            archive.writestr(f"{i}.txt", b"x\n")
    for name, rest in (("many.tar", 40), ("many.zip", 15)):
        said = [d for b in open_inputs([str(tmp_path / name)]) for d in b.diagnostics]
        assert said == [f"more than 10 archive entries in this input; the other {rest} skipped unread"], name


def test_counting_the_skipped_entries_hops_over_at_most_max_counted_headers(tmp_path, monkeypatch):
    """MAX_COUNTED bounds the headers hopped, not the members found: a tar of nothing but PAX headers after its
    entry budget (none of them a member) is not hopped to its end."""
    monkeypatch.setattr(inputs, "MAX_MEMBERS", 1)
    monkeypatch.setattr(inputs, "MAX_COUNTED", 100)
    pax = tarfile.TarInfo("meta")
    pax.type = tarfile.XHDTYPE
    _tar_of(tmp_path / "two.tar", [("a.txt", b"x\n"), ("b.txt", b"x\n")])
    with open(tmp_path / "meta.tar", "wb") as out:
        out.write((tmp_path / "two.tar").read_bytes()[:4 * 512])  # the two members, not their end blocks
        out.write(pax.tobuf(tarfile.USTAR_FORMAT) * 1000)
    said = [d for b in open_inputs([str(tmp_path / "meta.tar")]) for d in b.diagnostics]
    assert said == ["more than 1 archive entries in this input; the other at least 1 skipped unread"]


def test_damaged_zip_members_and_unusable_names_are_diagnosed_one_by_one(tmp_path):
    from hostile.cases_archives import _damaged_members

    _damaged_members(tmp_path)
    blobs = opened([str(tmp_path / "damaged.zip")])
    assert any("invalid" in d for d in blobs["corrupt.log"].diagnostics), blobs["corrupt.log"]
    numbered = {name: b for name, b in blobs.items() if name.startswith("#")}
    assert len(numbered) == 3 and all("no usable name" in b.diagnostics[0] for b in numbered.values())
    assert all(b.head == b"kernel: nothing here\n" for b in numbered.values())
    assert blobs["dmesg.txt"].head == XID


def test_a_cut_off_compressed_log_keeps_what_came_before_the_cut(tmp_path):
    log = b"".join(b"line %d of a long log\n" % i for i in range(200_000)) + XID
    cut = tmp_path / "kern.log.gz"
    cut.write_bytes(gzip.compress(log)[:-4000])  # a download that stopped early
    (blob,) = opened([str(cut)]).values()
    assert blob.size > len(log) // 2
    assert blob.head == log[:200]
    assert "damaged after" in blob.diagnostics[0]


def _fuzz_archives(tmp_path: Path) -> dict[str, bytes]:
    """Real archives of two members (a log with an Xid line, a plain text), one per format read."""
    members = {"var/log/dmesg.txt": OFFBUS, "notes.txt": b"nothing here\n" * 50}
    found: dict[str, bytes] = {}
    for mode in ("w", "w:gz", "w:bz2", "w:xz"):
        path = tmp_path / f"t{mode[2:]}.tar"
        _tar_of(path, list(members.items()), mode)
        found[path.name] = path.read_bytes()
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", method) as archive:
            for name, data in members.items():
                archive.writestr(name, data)
        found[f"m{method}.zip"] = buffer.getvalue()
    found["z.zst"] = zstandard.ZstdCompressor().compress(OFFBUS)
    found["x.xz"], found["b.bz2"], found["g.gz"] = lzma.compress(OFFBUS), bz2.compress(OFFBUS), gzip.compress(OFFBUS)
    return found


def _damage(data: bytes, rng: random.Random) -> bytes:
    damaged = bytearray(data)
    how = rng.randrange(4)
    if how == 0:
        for _ in range(rng.randint(1, 12)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
    elif how == 1:
        del damaged[rng.randrange(len(damaged)):]
    elif how == 2:
        at = rng.randrange(len(damaged))
        damaged[at:at + 512] = rng.randbytes(512)
    else:
        at = rng.randrange(len(damaged))
        damaged[at:at] = rng.randbytes(rng.randint(1, 700))
    return bytes(damaged)


def test_fuzzed_archives_give_diagnostics_never_exceptions(tmp_path):
    rng = random.Random(13)
    for name, data in _fuzz_archives(tmp_path).items():
        for attempt in range(100):
            path = tmp_path / f"{attempt}-{name}"
            path.write_bytes(_damage(data, rng))
            for blob in open_inputs([str(path)]):
                assert blob.reader is not None or blob.diagnostics, (name, attempt, blob.path)
                if blob.reader is not None:
                    blob.reader.read_at(0, blob.reader.size)
            path.unlink()


def _gnu_tar(tmp_path: Path) -> tuple[Path, list[str]]:
    """A tar GNU tar wrote of five logs, the header of the third overwritten with garbage; and the member
    list GNU tar itself gives of the damaged file with --ignore-zeros (the oracle)."""
    import shutil
    import subprocess

    if shutil.which("tar") is None:
        pytest.skip("GNU tar is not installed")
    source = tmp_path / "src"
    source.mkdir()
    sizes = [300, 5000, 2000, 700, 90]
    for i, size in enumerate(sizes):
        (source / f"log{i}.txt").write_bytes((b"line of log %d\n" % i) * (size // 14))
    (source / "log4.txt").write_bytes(XID)
    built = tmp_path / "bundle.tar"
    subprocess.run(["tar", "-cf", str(built), "-C", str(source), *[f"log{i}.txt" for i in range(5)]], check=True)
    data = bytearray(built.read_bytes())
    third = data.index(b"log2.txt\0")
    data[third:third + 512] = random.Random(5).randbytes(512)
    built.write_bytes(bytes(data))
    listed = subprocess.run(["tar", "-t", "--ignore-zeros", "-f", str(built)], capture_output=True, text=True,
                            check=False)  # GNU tar exits 2 after skipping the damage
    return built, listed.stdout.split()


def test_a_garbage_block_in_a_tar_is_skipped_as_gnu_tar_does(tmp_path):
    damaged, oracle = _gnu_tar(tmp_path)
    assert oracle == ["log0.txt", "log1.txt", "log3.txt", "log4.txt"]
    blobs = list(open_inputs([str(damaged)]))
    assert [b.path.split("!/")[1] for b in blobs if b.reader] == oracle
    (note,) = [d for b in blobs for d in b.diagnostics]
    assert "damaged at offset" in note and "skipped to the next valid header" in note
    assert any(e.kind == "xid" for e in analyze([str(damaged)]).events)


def test_a_cut_off_tar_reads_what_its_last_member_holds(tmp_path):
    bundle = tmp_path / "bundle.tar"
    _tar_of(bundle, [("notes.txt", b"x\n"), ("var/log/dmesg.txt", XID * 100)])
    bundle.write_bytes(bundle.read_bytes()[:1024 + 512 + 85 * 10])
    last = opened([str(bundle)])["var/log/dmesg.txt"]
    assert last.size == 85 * 10 and last.head == XID * 2 + XID[:30]
    assert "the archive ends after 850 of them" in last.diagnostics[0]


def test_utf16_is_re_encoded_across_block_boundaries(monkeypatch):
    from postmortem import reader

    monkeypatch.setattr(reader, "BLOCK", 7)  # odd: code units and surrogate pairs fall across blocks
    body = "GPU 🔥 fell off the bus: Xid 79 — ünïcödé\n" * 30
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        spooled = reader.utf16_to_utf8(BytesReader(bom + body.encode(codec)), 1 << 20)
        assert spooled.reader.read_at(0, 1 << 20) == body.encode("utf-8")


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA], ids=["bzip2", "lzma"])
def test_bzip2_and_lzma_zip_members_inflate_a_block_at_a_time(tmp_path, method):
    import tracemalloc

    bundle = tmp_path / "bundle.zip"
    with zipfile.ZipFile(bundle, "w") as archive:
        info = zipfile.ZipInfo("zeros.log")
        info.compress_type = method
        with archive.open(info, "w") as member:  # 128 MiB in a few hundred bytes: one read of zipfile's inflates it all
            for _ in range(128):
                member.write(bytes(MiB))
        archive.writestr(zipfile.ZipInfo("dmesg.txt"), XID, compress_type=method)
    tracemalloc.start()
    try:
        sizes = {blob.path.split("!/")[1]: (blob.reader.size, blob.reader.read_at(0, 200)) for blob in
                 open_inputs([str(bundle)])}
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sizes == {"zeros.log": (128 * MiB, bytes(200)), "dmesg.txt": (len(XID), XID)}
    assert peak < 100 * MiB  # the spool's 64 MiB in memory and one block, never the member at once


def test_undecodable_member_names_are_shown_printable(tmp_path):
    bundle = tmp_path / "bundle.tar"
    info = tarfile.TarInfo("logs/\udcff\udcfe.txt")  # bytes ff fe, as tarfile decodes them (surrogateescape)
    info.size = len(XID)
    with tarfile.open(bundle, "w", format=tarfile.GNU_FORMAT, encoding="utf-8", errors="surrogateescape") as archive:
        archive.addfile(info, io.BytesIO(XID))
    assert b"logs/\xff\xfe.txt" in bundle.read_bytes()
    report = analyze([str(bundle)])
    assert report.inputs[0].path == f"{bundle}!/logs/\ufffd\ufffd.txt"
    assert report.inputs[0].path.encode("utf-8")  # printable, writable anywhere
    assert report.events
