"""The fleet views (issue 15) over real archives: the corpus cases of tests/corpus, and real logs placed on one
machine the way a fleet's logs are (host name, PCI address and GPU UUID changed, as benchmarks/make_archive.py
and test_fleet.py's swaps change them)."""

from __future__ import annotations

import html as html_module
import importlib.util
import json
import os
import re
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from postmortem.cli import main
from postmortem.fleet import fleet
from postmortem.fleet.buckets import bucket_cases, buckets
from postmortem.fleet.report import PALETTE, render
from postmortem.fleet.scan import scan
from postmortem.fleet.store import connect

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
COPIED_AT = 1_924_992_000  # 2031-01-01: every copied file's mtime, a date no case's own evidence has


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory):
    """Every tests/corpus case (its files, not its case.yaml) as one case directory of an archive, scanned."""
    root = tmp_path_factory.mktemp("corpus-fleet")
    archive = root / "archive"
    for case in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        (archive / case.name).mkdir(parents=True)
        for file in case.iterdir():
            if file.name != "case.yaml":
                target = archive / case.name / file.name
                target.write_bytes(file.read_bytes())
                os.utime(target, (COPIED_AT, COPIED_AT))
    db = root / "corpus.sqlite"
    summary = scan(archive, db, jobs=4)
    assert not summary.errors, summary.errors
    return archive, db


@pytest.fixture(scope="module")
def template_store(tmp_path_factory):
    """26 cases of benchmarks/make_archive.py (13 real templates, 11 causes)."""
    spec = importlib.util.spec_from_file_location("make_archive", ROOT / "benchmarks" / "make_archive.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = tmp_path_factory.mktemp("template-fleet")
    module.make_archive(root / "archive", 26, tarballs=0)
    scan(root / "archive", root / "t.sqlite", jobs=2)
    return root / "archive", root / "t.sqlite"


def _case_at(db: Path, path: Path) -> tuple:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT c.id, c.time, c.host, c.cause, c.signature FROM locations l "
                            "JOIN cases c ON c.id = l.case_id WHERE l.path = ?", (str(path),)).fetchone()


# ------------------------------------------------------------------ hostless cases are not one machine


def test_hostless_cases_with_the_same_pci_address_are_not_one_phantom_node(corpus_store):
    archive, db = corpus_store
    hostless = ("mix-offbus-rminit-cmp40hx-09", "valg-rminit-after-bios-update-system76-01")
    with sqlite3.connect(db) as conn:  # the premise: two machines' faults on 0000:01:00, neither names a host
        rows = {conn.execute("SELECT f.host, f.pci, f.signature FROM gpu_faults f JOIN locations l "
                             "ON l.case_id = f.case_id WHERE l.path = ?", (str(archive / name),)).fetchone()
                for name in hostless}
    assert rows == {(None, "0000:01:00.0", "rminit-failed")}
    conn = connect(db, readonly=True)
    try:
        assert fleet.bad_nodes(conn) == []  # the old code drained "? 0000:01:00", a machine that does not exist
        assert fleet.card_or_slot(conn) == []
        found, _ = buckets(conn)
    finally:
        conn.close()
    ids = {_case_at(db, archive / name)[0] for name in hostless}
    named = {gpu for b in found for gpu in b.gpus if any(i in gpu for i in ids)}
    assert len(named) == 2  # two GPUs, each of its own case, not one


# ------------------------------------------------------------------ one row per node

JOURNAL_62 = CORPUS / "drv-xid62-pmu-halted-gsp-01" / "journal.txt"
JOURNAL_120 = CORPUS / "drv-xid120-gsp-crashcat-init-01" / "journal-boot.txt"
KERN_48 = ROOT / "samples" / "ecc-then-illegal-address" / "kern.log"
UUID_62 = "GPU-cccfc25d-fc66-0d40-e289-3b1a1f5d7896"
UUID_LINE_62 = f"Mar 11 10:37:00 dev.luketic kernel: NVRM: GPU at PCI:0000:01:00: {UUID_62}\n"

SAME_MACHINE = {
    # a second journal of the Xid 62 machine: the Xid 120 journal with its host, PCI address and UUID
    "by UUID": ({"xid62": (JOURNAL_62, {}),
                 "xid120": (JOURNAL_120, {"Kyrios": "dev.luketic", "0000:02:00": "0000:01:00",
                                          "GPU-751acba2-df95-76f6-5914-58abf0c3cba3": UUID_62})},
                "dev.luketic", {UUID_62}),
    # the ECC machine's GPU 0000:07:00 (no UUID line) faulting again later with the Xid 62 lines
    "by host and PCI": ({"xid48": (KERN_48, {}),
                         "xid62": (JOURNAL_62, {UUID_LINE_62: "",
                                                "dev.luketic": "worker4", "0000:01:00": "0000:07:00"})},
                        "worker4", {"worker4 0000:07:00.0"}),
}


@pytest.mark.parametrize("shape", SAME_MACHINE)
def test_a_machine_is_one_row_with_its_gpus_in_it(tmp_path, shape):
    cases, host, gpus = SAME_MACHINE[shape]
    for name, (source, changes) in cases.items():
        text = source.read_text()
        for old, new in changes.items():
            assert old in text
            text = text.replace(old, new)
        (tmp_path / "archive" / name).mkdir(parents=True)
        (tmp_path / "archive" / name / source.name).write_text(text)
    db = tmp_path / "one.sqlite"
    scan(tmp_path / "archive", db, jobs=1)
    conn = connect(db, readonly=True)
    try:
        nodes = fleet.bad_nodes(conn)
        page = render(conn)
    finally:
        conn.close()
    assert [(n.kind, n.label, n.cases) for n in nodes] == [("host", host, 2)]  # not a GPU row and a host row
    assert set(nodes[0].gpus) == gpus and all(count == 2 for count in nodes[0].gpus.values())
    assert all(count <= 2 for _, count in nodes[0].signature_counts())  # a case counts once per signature
    section = page.split('id="bad-nodes"', 1)[1].split("</section>", 1)[0]
    assert section.count("<tr>") == 2  # the header and the machine


# ------------------------------------------------------------------ a bucket's cases


def test_buckets_cases_lists_a_buckets_cases_with_their_paths(corpus_store):
    archive, db = corpus_store
    with sqlite3.connect(db) as conn:
        expected = {path for (path,) in conn.execute(
            "SELECT l.path FROM locations l JOIN cases c ON c.id = l.case_id "
            "WHERE c.cause = 'gpu-off-bus' AND c.signature = 'xid-79' AND c.status = 'ok'")}
    assert {str(archive / "drv-xid79-nvsmi-unknown-error-k8s-01"),
            str(archive / "valm-xid79-titanv-overheat-dmesg-t-01")} <= expected and len(expected) >= 3
    runner = CliRunner()
    text = runner.invoke(main, ["buckets", "--db", str(db), "--cases", "gpu-off-bus / xid-79"])
    assert text.exit_code == 0, text.output
    assert text.output.startswith(f"{len(expected)} case(s) in bucket gpu-off-bus / xid-79\n")
    assert {line.split()[-1] for line in text.output.splitlines()[2:]} == expected
    plain = runner.invoke(main, ["buckets", "--db", str(db), "--cases", "gpu-off-bus / xid-79", "--format", "json"])
    listed = json.loads(plain.output)
    assert listed["bucket"] == "gpu-off-bus / xid-79"
    assert {p for case in listed["cases"] for p in case["paths"]} == expected
    assert [case["time"] for case in listed["cases"] if case["time"]] == sorted(
        case["time"] for case in listed["cases"] if case["time"])
    unknown = runner.invoke(main, ["buckets", "--db", str(db), "--cases", "gpu-off-bus"])
    assert unknown.exit_code == 2 and "no bucket 'gpu-off-bus'" in unknown.output


# ------------------------------------------------------------------ times from the cases themselves


def test_first_and_last_seen_are_the_cases_own_times_not_file_mtimes(corpus_store):
    archive, db = corpus_store
    assert _case_at(db, archive / "drv-xid79-nvsmi-unknown-error-k8s-01")[1] == "2024-04-05T21:29:39"
    assert _case_at(db, archive / "valm-xid79-titanv-overheat-dmesg-t-01")[1] == "2025-04-15T16:50:03"
    assert _case_at(db, archive / "valg-offbus-dying-1050ti-proton-journal-01")[1] is None  # a year-less journal
    conn = connect(db, readonly=True)
    try:
        found, _ = buckets(conn)
        rows = bucket_cases(conn, "gpu-off-bus / xid-79")
        trend = fleet.trend(conn)
    finally:
        conn.close()
    off_bus = next(b for b in found if b.key == "gpu-off-bus / xid-79")
    assert (off_bus.first_seen, off_bus.last_seen) == ("2024-04-05T21:29:39", "2025-04-15T16:50:03")
    copied = "2031"  # the files' mtime: when they were copied, not when anything happened
    assert not any(copied in (b.first_seen or "") + (b.last_seen or "") for b in found)
    assert not any(copied in (r.time or "") for r in rows) and not any(copied in p for p in trend.periods)
    assert trend.undated > 0


# ------------------------------------------------------------------ colours and headers


def _cause_colours(page: str) -> list[tuple[str, str]]:
    """(cause, colour) of every swatch drawn next to a cause: the legend's and the buckets table's."""
    pairs = re.findall(r'<span class="swatch" style="background: ([^"]+)"></span>(?:<strong>)?([^<]+)<', page)
    return [(html_module.unescape(cause), colour) for colour, cause in pairs]


@pytest.mark.parametrize("store", ["corpus_store", "template_store"])
def test_each_cause_has_a_colour_of_its_own(store, request):
    _, db = request.getfixturevalue(store)
    conn = connect(db, readonly=True)
    try:
        page = render(conn)
        causes = {b.cause for b in buckets(conn)[0]}
    finally:
        conn.close()
    pairs = _cause_colours(page)
    colour_of = dict(pairs)
    assert set(colour_of) == causes and len(causes) > len(PALETTE)  # beyond the palette, every bucket drawn
    assert len(set(pairs)) == len(colour_of)  # one colour per cause wherever it is drawn
    assert len(set(colour_of.values())) == len(colour_of)  # and no two causes share one


def _declarations(css: str) -> list[tuple[str, str, str]]:
    """(selector, property, value) of every plain rule, in document order (rules inside @media included)."""
    found = []
    for selectors, body in re.findall(r"([^{}@;]+)\{([^{}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S)):
        for selector in selectors.split(","):
            for declaration in filter(str.strip, body.split(";")):
                name, _, value = declaration.partition(":")
                found.append((" ".join(selector.split()), name.strip(), value.strip()))
    return found


def test_table_headers_break_between_words_only(corpus_store):
    _, db = corpus_store
    conn = connect(db, readonly=True)
    try:
        page = render(conn)
    finally:
        conn.close()
    css = page.split("<style>", 1)[1].split("</style>", 1)[0]
    header_rules = [(name, value) for selector, name, value in _declarations(css)
                    if selector in ("th", "thead th", "table th") and name in ("overflow-wrap", "word-break")]
    last = dict(header_rules)  # the cascade: the last rule of equal or higher specificity wins
    assert header_rules and last.get("overflow-wrap", "normal") == "normal"
    assert last.get("word-break", "normal") in ("normal", "keep-all")


# ------------------------------------------------------------------ bad nodes by rate, versions against a contrast

XID48 = next(line.split("] ", 1)[1] for line in KERN_48.read_text().splitlines() if "): 48," in line)
XID79 = next(line for line in (ROOT / "tests/data/kernel_log/xid79-154-pf-flr-02.dmesg.txt").read_text().splitlines()
             if "): 79," in line)
BANNER = "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {driver}  Mon May  5 11:36:21 UTC 2025"  # drv-api-mismatch
LINUX = "Linux version {kernel} (buildd@lcy02-amd64-046) (gcc 13.2.0) #45-Ubuntu SMP"


def _fleet_case(host: str, n: int, uuid: str, xid: str | None, driver: str) -> str:
    """A machine's kernel log: its kernel and driver banners, its GPU's UUID line and maybe one real Xid line (its
    PCI address made the GPU's), each case at its own time."""
    stamp = f"Mar {1 + n // 24:2d} {n % 24:02d}:1{n % 10}:0{n % 7}"
    lines = [LINUX.format(kernel="6.8.0-45-generic"), BANNER.format(driver=driver),
             f"NVRM: GPU at PCI:0000:07:00: {uuid}"]
    if xid:
        lines.append(xid.replace("0000:01:00", "0000:07:00"))
    return "".join(f"{stamp} {host} kernel: [  {21 + i}.00{n:04d}] {line}\n" for i, line in enumerate(lines))


@pytest.fixture(scope="module")
def rated_fleet(tmp_path_factory):
    """40 machines with 2 hardware cases in 10 each (the fleet's rate), and node07 with 10 in 12: 8 on one card,
    2 on its neighbour. Half the machines and node07 run driver 570.148.06, where all the hardware is; every case
    runs one kernel."""
    root = tmp_path_factory.mktemp("rated-fleet")
    n = 0
    for m in range(40):
        host = f"node{m + 10:03d}"
        for i in range(10):
            uuid = f"GPU-{m:08x}-0000-0000-0000-{i:012x}"
            _write_case(root / "archive" / f"{host}-{i}", _fleet_case(
                host, n := n + 1, uuid, XID79 if i < 2 else None, "570.148.06" if m % 2 or i < 2 else "575.57.08"))
    for i in range(12):
        card = "GPU-bad00000-0000-0000-0000-00000000000a" if i < 8 else "GPU-bad00000-0000-0000-0000-00000000000b"
        _write_case(root / "archive" / f"node007-{i}",
                    _fleet_case("node007", n := n + 1, card, XID48 if i < 10 else None, "570.148.06"))
    db = root / "fleet.sqlite"
    summary = scan(root / "archive", db, jobs=2)
    assert not summary.errors and summary.analysed == 412
    return db


def _write_case(folder: Path, text: str) -> None:
    folder.mkdir(parents=True)
    (folder / "kern.log").write_text(text)


def _views(db: Path, *views):
    """Each view function's answer over the store at `db`, read-only, then the fleet page."""
    conn = connect(db, readonly=True)
    try:
        return [view(conn) for view in views], render(conn)
    finally:
        conn.close()


def test_bad_nodes_are_ranked_by_rate_against_the_fleet_with_the_bad_card_standing_out(rated_fleet):
    [nodes], page = _views(rated_fleet, fleet.bad_nodes)
    # 40 machines at two hardware cases each are the fleet's rate, not 40 bad nodes
    assert [(n.label, n.cases, n.all_cases) for n in nodes] == [("node007", 10, 12)]
    bad = nodes[0]
    assert bad.fleet_rate == pytest.approx(80 / 400) and bad.lift == pytest.approx((10 / 12) / 0.2)
    assert bad.gpu_counts() == [("GPU-bad00000-0000-0000-0000-00000000000a", 8, 0.8),
                                ("GPU-bad00000-0000-0000-0000-00000000000b", 2, 0.2)]
    section = page.split('id="bad-nodes"', 1)[1].split("</section>", 1)[0]
    assert section.count("<tr>") == 2 and "10 / 12" in section and "20.0 %" in section and "(×4.2)" in section
    assert "8 (80 %)" in section and "2 (20 %)" in section
    assert "at least 2 of its cases" in section and "2× that of the rest" in section  # the threshold, said


def test_a_fleet_at_one_rate_has_no_bad_node(tmp_path):
    archive = tmp_path / "archive"
    for m in range(64):  # the walkthrough's fleet: every node "bad" at two hardware cases each
        for i in range(3):
            _write_case(archive / f"n{m}-{i}", _fleet_case(f"gpu{m:02d}", m * 3 + i, f"GPU-{m:08x}-0-0-0-{i}",
                                                           XID79 if i < 2 else None, "570.148.06"))
    scan(archive, tmp_path / "s.sqlite", jobs=2)
    [nodes], _ = _views(tmp_path / "s.sqlite", fleet.bad_nodes)
    assert nodes == []  # (a lone machine, with no rest to compare, is judged on its count: test_a_machine_is_one_row)


def test_versions_go_with_a_cause_against_a_comparison_group_or_say_there_is_none(rated_fleet):
    [versions], page = _views(rated_fleet, fleet.version_links)
    links = {(v.fact, v.value, v.cause): v for v in versions.links}
    driver = next(v for (fact, value, _), v in links.items() if (fact, value) == ("driver_version", "570.148.06"))
    # 90 hardware cases of the 252 on 570.148.06 (20 machines' 200, 2 of 10 on the 20 others, node007's 12); none of
    # the 160 on 575.57.08
    assert (driver.with_cause + sum(v.with_cause for (f, value, c), v in links.items()
                                    if f == "driver_version" and value == "570.148.06" and v is not driver),
            driver.cases, driver.others) == (90, 252, 160)
    assert not any(value == "575.57.08" for _, value, _ in links)
    assert versions.uniform == (("kernel_version", "6.8.0-45-generic", 412),)
    section = page.split('id="versions"', 1)[1].split("</section>", 1)[0]
    assert "/ 252" in section and "/ 160" in section and "only here" in section
    assert "No contrast for kernel_version" in section and "6.8.0-45-generic" in section


# ------------------------------------------------------------------ the chart's window

def _dated_case(folder: Path, moment: datetime) -> None:
    """A real Xid 79 line (tests/data/kernel_log/xid79-154-pf-flr-02.dmesg.txt) as `dmesg -T` dates it."""
    stamp = f"{moment:%a %b} {moment.day:2d} {moment:%H:%M:%S %Y}"
    _write_case(folder, f"[{stamp}] {XID79}\n")


@pytest.fixture(scope="module")
def stray_store(tmp_path_factory):
    """120 cases over March 2026 and one log of 2017 that was left in the archive."""
    root = tmp_path_factory.mktemp("stray")
    for i in range(120):
        _dated_case(root / "archive" / f"c{i:03d}", datetime(2026, 3, 1, 6) + timedelta(hours=6 * i))
    _dated_case(root / "archive" / "old", datetime(2017, 5, 4, 12))
    scan(root / "archive", root / "s.sqlite", jobs=2)
    return root / "s.sqlite"


def test_a_few_stray_old_cases_do_not_stretch_the_chart_and_the_page_says_so(stray_store):
    [found, everything, first_days], page = _views(stray_store, fleet.trend,
                                                   lambda conn: fleet.trend(conn, since="2017-01-01"),
                                                   lambda conn: fleet.trend(conn, until="2026-03-02"))
    assert (found.unit, found.start, found.outside, found.chosen) == ("day", "2026-03-01T06:00:00", 1, False)
    assert found.periods[0] == "2026-03-01" and sum(sum(c.values()) for c in found.counts) == 120
    assert "1 dated case(s) fall outside it" in page and "report --since DATE" in page
    assert (everything.unit, everything.outside) == ("week", 0)  # asked for, the stray is drawn
    assert first_days.chosen and first_days.periods[-1] == "2026-03-02 18:00"  # the last day, whole
    assert sum(sum(c.values()) for c in first_days.counts) == 7 and first_days.outside == 114  # 3 + 4 cases


def test_report_takes_since_and_until_and_says_what_a_date_is(stray_store, tmp_path):
    runner = CliRunner()
    page = tmp_path / "f.html"
    done = runner.invoke(main, ["fleet", "report", "--db", str(stray_store), "-o", str(page), "--since",
                                "2017-01-01"])
    assert done.exit_code == 0, done.output
    assert "the window asked for" in page.read_text()
    wrong = runner.invoke(main, ["report", "--db", str(stray_store), "-o", str(page), "--until", "March"])
    assert wrong.exit_code == 2 and "'March' is not a date" in wrong.output
