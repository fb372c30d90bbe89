"""Fleet scans over archives generated from the real logs in samples/ and tests/data (benchmarks/make_archive.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

import postmortem
from postmortem.cli import main
from postmortem.fleet import fleet
from postmortem.fleet.buckets import buckets
from postmortem.fleet.report import render
from postmortem.fleet.scan import scan
from postmortem.fleet.stack import signature
from postmortem.fleet.store import connect, export

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("make_archive", ROOT / "benchmarks" / "make_archive.py")
make_archive_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_archive_module)
make_archive = make_archive_module.make_archive

ETHMINER_STACK = "ethminer+0xa52b8 | libcuda.so.1+0x1d9d30 | libcuda.so.1+0x3041d3"
EXPECTED = {
    "ecc-then-illegal-address": ("gpu-memory-ecc", "xid-48", None),
    "gpu-off-bus": ("gpu-off-bus", "xid-79", None),
    "xid79-flr": ("gpu-off-bus", "xid-79", None),
    "rtx5090-sm120": ("arch-mismatch", "arch-mismatch", None),
    "xid13-vllm": ("illegal-memory-access", "xid-13", None),
    "oom-framepack": ("gpu-oom", "gpu-oom", None),
    "segv-ethminer": ("native-crash", "native-crash", ETHMINER_STACK),
    "nccl-timeout": ("nccl-timeout", "nccl-watchdog-timeout", None),
    "host-oom": ("host-oom", "oom-kill", None),
    "shm": ("shm-exhausted", "shm-exhausted", None),
    "device-assert": ("device-assert", "device-assert", None),
    "coredump-abort": ("native-crash", "native-crash-coredump", "libpython3.11.so.1.0!PyThread_exit_thread"),
    "noise-only": ("unknown", None, None),
}
"""Template of make_archive -> (cause, signature, stack signature) every copy of it must get."""


def _bucket_counts(db: Path) -> Counter:
    conn = connect(db, readonly=True)
    try:
        found, _ = buckets(conn)
    finally:
        conn.close()
    return Counter({(b.cause, b.signature, b.detail if b.detail_kind == "stack" else None): b.count for b in found})


def _count(db: Path, table: str = "cases") -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    """260 cases (20 of each template, some as .tar.gz) scanned on 2 local processes."""
    root = tmp_path_factory.mktemp("fleet")
    expected = make_archive(root / "archive", 260)
    db = root / "fleet.sqlite"
    summary = scan(root / "archive", db, jobs=2)
    return root / "archive", db, expected, summary


def test_scan_gives_expected_buckets(scanned):
    archive, db, expected, summary = scanned
    assert summary.found == summary.analysed == 260 and not summary.errors
    assert any(name.endswith(".tar.gz") for name in expected)
    assert _bucket_counts(db) == Counter(EXPECTED[template] for template in expected.values())
    with sqlite3.connect(db) as conn:
        by_path = dict(conn.execute("SELECT l.path, c.cause FROM locations l JOIN cases c ON c.id = l.case_id"))
    assert all(by_path[str(archive / name)] == EXPECTED[t][0] for name, t in expected.items())


def test_rescan_adds_nothing(scanned):
    archive, db, _, _ = scanned
    before = {t: _count(db, t) for t in ("cases", "findings", "events", "facts", "gpus", "locations")}
    again = scan(archive, db, jobs=2)
    assert (again.analysed, again.unchanged, again.known) == (0, 260, 0)
    assert {t: _count(db, t) for t in before} == before


def test_store_tables_load_as_dataframes(scanned, tmp_path):
    _, db, _, _ = scanned
    fleet_data = postmortem.load(db)
    assert len(fleet_data.cases) == 260
    assert set(fleet_data.cases["cause"]) == {cause for cause, _, _ in EXPECTED.values()}
    assert set(fleet_data.events["role"]) == {"evidence"}  # suspects only when nothing matched and events exist
    assert "gpu_uuid" in set(fleet_data.facts["name"])
    written = export(db, "csv", tmp_path / "csv")
    assert {p.name for p in written} >= {"cases.csv", "findings.csv", "events.csv", "facts.csv", "gpus.csv"}
    assert len((tmp_path / "csv" / "cases.csv").read_text().splitlines()) == 261


def test_buckets_command_json(scanned):
    _, db, _, _ = scanned
    result = CliRunner().invoke(main, ["buckets", "--db", str(db), "--format", "json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    off_bus = next(b for b in found["buckets"] if b["signature"] == "xid-79")
    assert off_bus["count"] == 40
    # plain dmesg has no wall-clock date: the files' mtimes (spread over two months by make_archive) are not taken
    assert off_bus["first_seen"] is None and off_bus["last_seen"] is None
    assert found["errors"] == 0


def test_fleet_report_is_self_contained_and_escaped(tmp_path):
    hostile = tmp_path / "hostile"
    make_archive(hostile, 12)  # every template but noise-only: the hostile case is the one unknown
    (hostile / "<b onmouseover=alert(1)>case").mkdir()
    (hostile / "<b onmouseover=alert(1)>case" / "job.log").write_text("hello\n")
    dated = ROOT / "tests/corpus/drv-xid79-nvsmi-unknown-error-k8s-01"  # a wall-clock date: the trend chart is drawn
    shutil.copytree(dated, hostile / dated.name, ignore=shutil.ignore_patterns("case.yaml"))
    store = tmp_path / "h.sqlite"
    scan(hostile, store, jobs=1)
    out = tmp_path / "fleet.html"
    result = CliRunner().invoke(main, ["report", "--db", str(store), "-o", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "Content-Security-Policy" in html and "script-src &#39;none&#39;" in html
    assert "<script" not in html and "<b onmouseover" not in html and "&lt;b onmouseover=alert(1)&gt;case" in html
    assert "<svg" in html and "http://" not in html.replace("http://www.w3.org", "")


def _small_archive(tmp_path: Path, cases: int = 26) -> tuple[Path, dict[str, str]]:
    expected = make_archive(tmp_path / "archive", cases, tarballs=0)
    return tmp_path / "archive", expected


def test_modified_case_is_reanalysed_and_moved_case_is_not(tmp_path):
    archive, expected = _small_archive(tmp_path)
    db = tmp_path / "s.sqlite"
    scan(archive, db, jobs=2)
    arch = next(name for name, t in expected.items() if t == "rtx5090-sm120")
    (archive / arch / "train.log").write_text((ROOT / "samples/gpu-off-bus/dmesg.txt").read_text())
    second = scan(archive, db, jobs=2)
    assert (second.analysed, second.unchanged) == (1, 25)
    assert _count(db) == 26  # the old content of that case is gone, not counted twice
    with sqlite3.connect(db) as conn:
        cause = conn.execute("SELECT c.cause FROM locations l JOIN cases c ON c.id = l.case_id WHERE l.path = ?",
                             (str(archive / arch),)).fetchone()[0]
    assert cause == "gpu-off-bus"
    other = next(name for name, t in expected.items() if t == "shm")
    (archive / other).rename(archive / "moved-elsewhere")
    third = scan(archive, db, jobs=2)
    assert (third.analysed, third.known) == (0, 1)
    assert _count(db) == 26


def test_corrupt_case_is_recorded_not_fatal(tmp_path, monkeypatch):
    archive, _ = _small_archive(tmp_path, 13)
    broken = archive / "broken-gzip"
    broken.mkdir()
    whole = subprocess.run(["gzip", "-c", str(ROOT / "samples/gpu-off-bus/dmesg.txt")], capture_output=True,
                           check=False).stdout
    (broken / "dmesg.txt.gz").write_bytes(whole[: len(whole) // 2] + b"\x00garbage")
    poison = archive / "poison"
    poison.mkdir()
    (poison / "train.log").write_text("anything\n")
    import postmortem.inputs

    real = postmortem.inputs.open_inputs

    def failing(paths):
        if any("poison" in p for p in paths):
            raise RuntimeError("parser exploded")
        return real(paths)

    monkeypatch.setattr(postmortem.inputs, "open_inputs", failing)
    db = tmp_path / "c.sqlite"
    summary = scan(archive, db, jobs=1)
    assert summary.found == 15 and summary.analysed == 15
    assert [path for path, _ in summary.errors] == [str(poison)]
    assert "RuntimeError: parser exploded" in summary.errors[0][1]
    with sqlite3.connect(db) as conn:
        rows = dict(conn.execute("SELECT l.path, c.status || ' ' || COALESCE(c.diagnostic, '') || ' ' || "
                                 "COALESCE(c.input_diagnostics, 0) FROM locations l JOIN cases c ON c.id = l.case_id"))
    assert rows[str(poison)].startswith("error RuntimeError: parser exploded")
    assert rows[str(broken)].startswith("ok") and not rows[str(broken)].endswith(" 0")  # readable, with a diagnostic
    assert _count(db) == 15


def test_dask_engine_gives_the_same_buckets(tmp_path):
    pytest.importorskip("distributed", reason="dask.distributed not installed (pip install 'gpu-postmortem[dask]')")
    from distributed import LocalCluster

    archive, _ = _small_archive(tmp_path, 52)
    scan(archive, tmp_path / "local.sqlite", jobs=2)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        summary = scan(archive, tmp_path / "dask.sqlite", engine="dask", scheduler=cluster.scheduler_address)
    assert summary.analysed == 52 and not summary.errors
    assert _bucket_counts(tmp_path / "dask.sqlite") == _bucket_counts(tmp_path / "local.sqlite")


def test_store_survives_sigkill_mid_scan(tmp_path):
    archive, _ = _small_archive(tmp_path, 2000)
    db = tmp_path / "k.sqlite"
    command = [sys.executable, "-m", "postmortem", "scan", str(archive), "--db", str(db), "-j", "2"]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    committed = 0
    while time.monotonic() < deadline and child.poll() is None and committed == 0:
        time.sleep(0.02)
        try:
            committed = _count(db) if db.exists() else 0
        except sqlite3.OperationalError:
            committed = 0
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        done = conn.execute("SELECT COUNT(*) FROM locations").fetchone()[0]
        assert 0 < done < 2000, "the scan was not killed mid-way"
        assert conn.execute("SELECT COUNT(*) FROM cases c WHERE NOT EXISTS "
                            "(SELECT 1 FROM locations l WHERE l.case_id = c.id)").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM cases c WHERE status = 'ok' AND cause != 'unknown' AND NOT EXISTS "
                            "(SELECT 1 FROM findings f WHERE f.case_id = c.id)").fetchone()[0] == 0
    resumed = subprocess.run(command, capture_output=True, check=False, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{done} unchanged since the last scan" in resumed.stdout
    assert _count(db, "locations") == 2000  # every case stored once; identical copies share one content id
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(DISTINCT case_id) FROM locations").fetchone()[0] == _count(db)


def _kern(host: str, pci: str, uuid: str, xid_line: str | None, clock: str = "Dec  2 11:38:4") -> str:
    """Real NVRM lines (tests/data/kernel_log/xid79-154-pf-flr-02.dmesg.txt, samples/ecc-then-illegal-address/kern.log)
    with the host, the PCI address and the GPU UUID changed, as a technician's swap would change them."""
    lines = [f"{clock}0 {host} kernel: [  210.000001] NVRM: GPU at PCI:{pci}: {uuid}"]
    if xid_line:
        lines.append(f"{clock}7 {host} kernel: [  219.470994] "
                     + xid_line.replace("0000:07:00", pci).replace("0000:01:00", pci))
    return "\n".join(lines) + "\n"


def test_card_or_slot(tmp_path):
    xid48 = next(line for line in (ROOT / "samples/ecc-then-illegal-address/kern.log").read_text().splitlines()
                 if "): 48," in line).split("] ", 1)[1]
    xid79 = next(line
                 for line in (ROOT / "tests/data/kernel_log/xid79-154-pf-flr-02.dmesg.txt").read_text().splitlines()
                 if "): 79," in line)
    card_a, card_b, card_c = ("GPU-5f7a9ad6-8a58-1f45-473a-76281b7215a" + c for c in "abc")
    cases = {
        "a1": _kern("node01", "0000:07:00", card_a, xid48),   # card A faults in node01 slot 07
        "a2": _kern("node02", "0000:3b:00", card_a, xid48),   # ... and again after the swap into node02 slot 3b
        "b1": _kern("node05", "0000:07:00", card_b, xid79),   # card B falls off the bus in node05 slot 07
        "b2": _kern("node06", "0000:3b:00", card_b, None),    # quiet in node06 after the swap
        "c1": _kern("node05", "0000:07:00", card_c, xid79),   # card C, put into node05 slot 07, falls off too
    }
    archive = tmp_path / "swaps"
    for name, text in cases.items():
        (archive / name).mkdir(parents=True)
        (archive / name / "kern.log").write_text(text)
    db = tmp_path / "swaps.sqlite"
    scan(archive, db, jobs=1)
    conn = connect(db, readonly=True)
    verdicts = {m.card: m.verdict for m in fleet.card_or_slot(conn)}
    assert verdicts == {card_a: "card", card_b: "slot"}
    # node05's two faults of two cases are no more than the rest's rate (two of three): the swaps explain them, and
    # the card-or-slot view names them; the bad-node list waits for a rate well above the fleet's
    assert fleet.bad_nodes(conn) == []
    html = render(conn)
    assert "follow the card or the slot" in html and card_a in html
    conn.close()


def test_stack_signature_skips_runtime_and_interpreter_frames():
    frames = [
        {"function": "__pthread_kill_implementation", "module": "libc.so.6"},
        {"function": "raise", "module": "libc.so.6"},
        {"function": "abort", "module": "libc.so.6"},
        {"function": "_ZN9__gnu_cxx27__verbose_terminate_handlerEv", "module": "libstdc++.so.6"},
        {"function": "at::native::launch_kernel(int, long)", "module": "/opt/torch/lib/libtorch_cuda.so"},
        {"function": "??", "module": "/usr/lib/libcuda.so.1", "offset": "0x1d9d30"},
        {"function": "_PyEval_EvalFrameDefault", "module": "python3.11"},
        {"function": "main", "module": "python3.11"},
    ]
    assert signature(frames) == "libtorch_cuda.so!at::native::launch_kernel | libcuda.so.1+0x1d9d30 | python3.11!main"
    glibc = ["/lib/x86_64-linux-gnu/libc.so.6(+0x46210) [0x7f17662c1210]",
             "/lib/x86_64-linux-gnu/libcuda.so.1(cuLaunchKernel+0x1a2) [0x7f1764564d30]",
             "train.py:12 in main"]
    assert signature(glibc) == "libcuda.so.1!cuLaunchKernel"


def _connect_at_once(path: str, barrier, results) -> None:
    barrier.wait()
    try:
        connect(path).close()
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - the test reports what went wrong
        results.put(f"{type(exc).__name__}: {exc}")


def test_scans_creating_one_fresh_store_at_once_both_succeed(tmp_path):
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for attempt in range(3):
        path, barrier, results = str(tmp_path / f"fresh-{attempt}.db"), context.Barrier(12), context.Queue()
        workers = [context.Process(target=_connect_at_once, args=(path, barrier, results)) for _ in range(12)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        outcomes = [results.get(timeout=5) for _ in workers]
        assert outcomes == ["ok"] * 12, outcomes
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == len(
            conn.execute("SELECT version FROM schema_migrations GROUP BY version").fetchall())
        conn.close()


def test_a_case_past_its_time_budget_is_stopped_and_the_finished_ones_are_committed_meanwhile(tmp_path, monkeypatch):
    import threading

    from postmortem.fleet import scan as scan_module

    archive, _ = _small_archive(tmp_path, 6)
    (archive / "zz-huge").mkdir()
    shutil.copy(ROOT / "samples/gpu-off-bus/dmesg.txt", archive / "zz-huge" / "dmesg.txt")
    real_analyse = scan_module.analyse_case

    def stuck_on_the_last(case, known):  # the forked workers inherit it; how slow a real input is depends on the CPU
        if case.path.endswith("zz-huge"):
            time.sleep(120)
        return real_analyse(case, known)

    monkeypatch.setattr(scan_module, "analyse_case", stuck_on_the_last)
    monkeypatch.setattr(scan_module, "CASE_SECONDS", 2.0)
    db = tmp_path / "budget.sqlite"
    done: list = []
    worker = threading.Thread(target=lambda: done.append(scan(archive, db, jobs=2)))
    started = time.monotonic()
    worker.start()
    committed_while_running = 0
    while worker.is_alive():
        time.sleep(0.05)
        try:
            committed_while_running = max(committed_while_running, _count(db) if db.exists() else 0)
        except sqlite3.OperationalError:
            pass
    summary = done[0]
    assert committed_while_running >= 6, "finished cases waited for the slow one"
    assert time.monotonic() - started < 30
    assert [path for path, _ in summary.errors] == [str(archive / "zz-huge")]
    assert "ran past 2 s" in summary.errors[0][1]


# ------------------------------------------------------------------ issue 13: digests that tell cases apart


def _sparse(path: Path, size: int, writes: dict[int, bytes]) -> Path:
    """A `size`-byte file of zeros (sparse: quick to make) with `writes` at their offsets."""
    with open(path, "wb") as handle:
        handle.truncate(size)
        for at, data in writes.items():
            handle.seek(at)
            handle.write(data)
    return path


def _between_samples(size: int, gap: int) -> int:
    """An offset `core_digest` does not read: past the end of its `gap`-th sample, before the next."""
    from postmortem.reader import DIGEST_SAMPLE, DIGEST_SAMPLES

    return size * gap // (DIGEST_SAMPLES + 1) + DIGEST_SAMPLE + 100


def _core(path: Path, size: int, note: bytes, elsewhere: bytes = b"") -> Path:
    """An ELF core header with one PT_NOTE segment between two samples of a sparse `size`-byte file."""
    import struct

    header = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), 4, 62, 1, 0, 64, 0, 0, 64, 56, 1,
                         64, 0, 0)
    phdr = struct.pack("<IIQQQQQQ", 4, 0, _between_samples(size, 30), 0, 0, len(note), 0, 4)
    return _sparse(path, size, {0: header + phdr, _between_samples(size, 30): note,
                                _between_samples(size, 10): elsewhere})


def test_big_logs_that_differ_only_in_the_middle_are_different_cases(tmp_path):
    from postmortem.fleet.cases import SAMPLED_ABOVE, Case, case_digest, file_digest

    size = SAMPLED_ABOVE + (16 << 20)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = _sparse(tmp_path / "a" / "train.log", size, {size // 2: b"rank 3 Xid 79\n"})
    two = _sparse(tmp_path / "b" / "train.log", size, {size // 2: b"rank 5 Xid 48\n"})
    assert file_digest(one) != file_digest(two)
    assert not file_digest(one).startswith("sha256-sampled:")
    cases = [Case(str(p.parent), (str(p),), "") for p in (one, two)]
    assert case_digest(cases[0]) != case_digest(cases[1])


def test_big_cores_are_sampled_with_their_notes_read_whole(tmp_path):
    from postmortem.fleet.cases import SAMPLED_ABOVE, file_digest
    from postmortem.pipeline import analyze

    size = SAMPLED_ABOVE + (16 << 20)
    one = _core(tmp_path / "one.core", size, b"CORE\0" + b"registers of thread 1" * 10)
    two = _core(tmp_path / "two.core", size, b"CORE\0" + b"registers of thread 2" * 10)
    same = _core(tmp_path / "same.core", size, b"CORE\0" + b"registers of thread 1" * 10, elsewhere=b"x")
    digests = [file_digest(p) for p in (one, two, same)]
    assert all(d.startswith("sha256-sampled:") for d in digests)
    assert digests[0] != digests[1]  # the notes differ
    assert digests[0] == digests[2]  # a byte outside the notes and the samples is not read: still a sample
    report = analyze([str(one), str(two)])
    assert report.inputs[0].digest == digests[0] and report.inputs[1].digest == digests[1]


def test_a_folder_whose_name_is_not_utf8_is_stored_escaped_and_the_rescan_skips_it(tmp_path):
    """Round 3, item 10: a case folder named b'\\xff\\xfe-node' beside a good one; both stored, the name in a
    printable form that keeps its bytes, and a second scan finds both unchanged."""
    archive = tmp_path / "fleet"
    xid = (ROOT / "samples/gpu-off-bus/dmesg.txt").read_text()
    for name in ("good-node", os.fsdecode(b"\xff\xfe-node")):
        (archive / name).mkdir(parents=True)
        (archive / name / "dmesg.txt").write_text(xid)
    (archive / "good-node" / "dmesg.txt").write_text(xid + "\n")  # a different case, not one known twice
    db = tmp_path / "s.sqlite"
    first = scan(archive, db, jobs=1)
    assert (first.found, first.analysed, first.errors) == (2, 2, [])
    escaped = f"{archive}/\\xff\\xfe-node"
    with sqlite3.connect(db) as conn:
        located = dict(conn.execute("SELECT l.path, c.cause FROM locations l JOIN cases c ON c.id = l.case_id"))
        paths = {row[0] for row in conn.execute("SELECT path FROM events")}
    assert located == {str(archive / "good-node"): "gpu-off-bus", escaped: "gpu-off-bus"}
    assert f"{escaped}/dmesg.txt" in paths
    second = scan(archive, db, jobs=1)
    assert (second.found, second.unchanged, second.analysed, second.errors) == (2, 2, 0, [])


@pytest.mark.parametrize("kind", ["another-apps-sqlite", "random-bytes", "damaged-pages"])
def test_a_store_that_is_not_ours_or_is_damaged_is_one_sentence_and_left_as_it_is(tmp_path, kind):
    """Round 3, item 14: every command that opens a store answers with one line naming why, exit 2."""
    from hostile.cases_store import STORES, XID, damaged_store

    db = tmp_path / "store.sqlite"
    damaged_store(tmp_path, db) if kind == "damaged-pages" else STORES[kind](db)
    before = db.read_bytes()
    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "dmesg.txt").write_text(XID)
    (tmp_path / "issue.md").write_text(f"# GPU lost\n\n```\n{XID}```\n")
    why = {"another-apps-sqlite": "not a postmortem store (application id 0x0, tables schema_migrations, users)",
           "random-bytes": "file is not a database", "damaged-pages": "database disk image is malformed"}[kind]
    for args in (["scan", str(tmp_path / "case"), "--db", str(db), "-j", "1"], ["buckets", "--db", str(db)],
                 ["report", "--db", str(db), "-o", str(tmp_path / "r.html")],
                 ["triage", str(tmp_path / "issue.md"), "--store", str(db)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output, result.exception)
        error = [line for line in result.output.splitlines() if line.startswith("Error:")]
        assert len(error) == 1 and why in error[0], (args, result.output)
        assert db.read_bytes() == before


def test_a_store_made_before_the_application_id_is_still_ours_and_gets_it(tmp_path):
    """Round 3, item 14: the marker is new; a store without it but with our tables is read, and stamped by the next
    scan."""
    from postmortem.fleet.store import APPLICATION_ID

    case = tmp_path / "case"
    case.mkdir()
    (case / "dmesg.txt").write_text((ROOT / "samples/gpu-off-bus/dmesg.txt").read_text())
    db = tmp_path / "old.sqlite"
    scan(case, db, jobs=1)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        conn.execute("PRAGMA application_id = 0")
    conn.close()
    assert CliRunner().invoke(main, ["buckets", "--db", str(db)]).exit_code == 0
    assert scan(case, db, jobs=1).unchanged == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()


def _summaries_equal_a_recount(db: Path) -> None:
    """The summaries the triggers keep (store.MIGRATIONS 2: buckets, their hosts, version facts) equal the count from
    the cases themselves."""
    from postmortem.fleet.buckets import KEY

    keyed = ", ".join(f"COALESCE({part}, '')" for part in KEY)
    with sqlite3.connect(db) as conn:
        kept = sorted(conn.execute("SELECT cause, signature, kind, detail, cases FROM bucket_counts"))
        recount = sorted(conn.execute(f"SELECT {keyed}, COUNT(*) FROM cases WHERE status = 'ok' GROUP BY 1, 2, 3, 4"))
        assert kept == recount
        kept = sorted(conn.execute("SELECT cause, signature, kind, detail, host, cases FROM bucket_hosts"))
        recount = sorted(conn.execute(f"SELECT {keyed}, host, COUNT(*) FROM cases WHERE status = 'ok' AND host != '' "
                                      "GROUP BY 1, 2, 3, 4, 5"))
        assert kept == recount
        facts = ("FROM facts f JOIN cases c ON c.id = f.case_id WHERE c.status = 'ok' AND f.name IN "
                 f"({', '.join(repr(name) for name in fleet.VERSION_FACTS)})")
        kept = sorted(conn.execute("SELECT name, value, cause, cases FROM fact_counts"))
        assert kept == sorted(conn.execute(f"SELECT f.name, f.value, c.cause, COUNT(DISTINCT c.id) {facts} "
                                           "GROUP BY 1, 2, 3"))
        kept = sorted(conn.execute("SELECT name, cause, cases FROM fact_cases"))
        assert kept == sorted(conn.execute(f"SELECT f.name, c.cause, COUNT(DISTINCT c.id) {facts} GROUP BY 1, 2"))


def test_bucket_summaries_stay_exact_as_cases_are_added_reanalysed_changed_and_dropped(tmp_path):
    """The triggers behind `buckets`: a scan, a case whose content changed (its old case dropped), a case moved, and
    rows changed in place (cause, host, stack, status) and deleted: after each the summaries equal a recount."""
    archive, expected = _small_archive(tmp_path)
    db = tmp_path / "s.sqlite"
    scan(archive, db, jobs=1)
    _summaries_equal_a_recount(db)
    arch = next(name for name, t in expected.items() if t == "rtx5090-sm120")
    (archive / arch / "train.log").write_text((ROOT / "samples/gpu-off-bus/dmesg.txt").read_text())
    scan(archive, db, jobs=1)
    _summaries_equal_a_recount(db)
    with sqlite3.connect(db) as conn:
        ids = [row[0] for row in conn.execute("SELECT id FROM cases ORDER BY id")]
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("UPDATE cases SET cause = 'unknown', fingerprint = 'fp1', stack_signature = NULL WHERE id = ?",
                     (ids[0],))
        conn.execute("UPDATE cases SET host = 'elsewhere' WHERE id = ?", (ids[1],))
        conn.execute("UPDATE cases SET cause = 'native-crash', stack_signature = 'a | b' WHERE id = ?", (ids[2],))
        conn.execute("UPDATE cases SET status = 'error' WHERE id = ?", (ids[3],))
        conn.execute("DELETE FROM cases WHERE id = ?", (ids[4],))
        conn.executemany("INSERT INTO facts VALUES (?, 'driver_version', ?)",  # a second value, and a repeated one
                         [(ids[5], "535.104.05"), (ids[5], "550.54.15"), (ids[5], "550.54.15"), (ids[6], "535.104.05")])
        conn.execute("DELETE FROM facts WHERE case_id = ? AND name = 'driver_version'", (ids[7],))
        conn.execute("UPDATE cases SET cause = 'gpu-oom' WHERE id = ?", (ids[5],))
    _summaries_equal_a_recount(db)
    with connect(db, readonly=True) as conn:
        found, errors = buckets(conn)
    assert sum(b.count for b in found) == len(ids) - 2 and errors == 1
    assert any(b.detail == "fp1" and b.detail_kind == "fingerprint" for b in found)


def test_a_store_of_the_first_schema_gets_its_summaries_when_migrated(tmp_path):
    """A store written before migration 2 is migrated by the next writer: its summaries are filled from the cases it
    holds (the migration's backfill), and `buckets` reads them as it would have read every case."""
    archive, _ = _small_archive(tmp_path)
    db = tmp_path / "s.sqlite"
    scan(archive, db, jobs=1)
    with connect(db, readonly=True) as conn:
        before = [b.plain() for b in buckets(conn)[0]]
    with sqlite3.connect(db) as conn:  # back to the first schema, as a store of the release before
        added = conn.execute("SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'index', 'table') AND "
                             "(name LIKE 'bucket%' OR name LIKE 'fact!_%' ESCAPE '!' "
                             "OR name IN ('cases_hour', 'cases_bucket_key', 'findings_layer'))").fetchall()
        for kind, name in added:
            conn.execute(f"DROP {kind.upper()} IF EXISTS {name}")
        conn.execute("DELETE FROM schema_migrations WHERE version > 1")
    connect(db).close()  # a writer migrates
    _summaries_equal_a_recount(db)
    with connect(db, readonly=True) as conn:
        assert [b.plain() for b in buckets(conn)[0]] == before
