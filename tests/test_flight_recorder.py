"""Flight-recorder dumps of real 4-rank jobs (tests/data/flight_recorder): the suspect and the mismatch are those
PyTorch's own fr_trace printed for the same dumps (fr_trace_pgconfig.txt, parsed here); hostile, truncated and
mixed-version dumps give diagnostics and the conclusion the readable dumps still allow."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import regex
from click.testing import CliRunner

from postmortem.cli import main
from postmortem.flight import with_collective_mismatches
from postmortem.inputs import open_inputs
from postmortem.model import Event
from postmortem.pipeline import read_blob
from postmortem.safe_pickle import loads

DATA = Path(__file__).parent / "data" / "flight_recorder"
SCENARIOS = ("skip", "size", "sleep", "barrier", "never")
FORMATS = {"pickle": "nccl_trace_rank_[0-9]", "json": "fr_json_rank_[0-9].json"}
ERROR_TYPES = {"COLLECTIVE_TYPE_MISMATCH": "op", "SIZE_OR_SYNTAX_MISMATCH": "sizes",
               "COLLECTIVE_DTYPE_MISMATCH": "dtypes"}
"""fr_trace's error types (torch/distributed/flight_recorder/components/types.py MatchState) in our words."""


@dataclass(frozen=True)
class Oracle:
    """What fr_trace said about one scenario: its first error."""

    seq: int
    pg: str
    pg_desc: str
    suspects: str
    mismatch: str
    expected: str | None
    found: str | None
    caller: str


def oracle(scenario: str) -> Oracle:
    """The first error of fr_trace's analysis in fr_trace_pgconfig.txt (it goes on to the errors that follow from
    it: in `size`, seq 6 that only rank 1 reached)."""
    analysis = (DATA / scenario / "fr_trace_pgconfig.txt").read_text().split("\n\n")[0]
    text = regex.split(r"\n(?=Collective sequence number|Not all ranks joining)", analysis)[1]  # [0]: the command
    seq = regex.search(r"sequence number: (\d+)", text)
    group = regex.search(r"group info: (\w+):(\w+)", text)
    frame = next(m for m in regex.finditer(r"(?m)^\s*(\S+) at (\S+):(\d+)$", text) if "/torch/" not in m[2])
    caller = f"{frame[1]} ({os.path.basename(frame[2])}:{frame[3]})"
    assert seq and group
    if missing := regex.search(r"missing ranks: \{([\d, ]+)\}", text):
        return Oracle(int(seq[1]), group[1], group[2], missing[1], "missing", None, None, caller)
    culprit = regex.search(r"Culprit rank (\d+); Error type: (\w+), Expected [^']*'([^']*)'.*found [^']*'([^']*)'",
                           text)
    assert culprit, text
    return Oracle(int(seq[1]), group[1], group[2], culprit[1], ERROR_TYPES[culprit[2]], culprit[3], culprit[4],
                  caller)


def read(paths: list[Path]) -> tuple[list[Event], dict[str, tuple[str, ...]]]:
    """The events of `paths` after the cross-rank analysis, and each input's diagnostics."""
    events: list[Event] = []
    diagnostics = {}
    for blob in open_inputs([str(p) for p in paths]):
        info, found = read_blob(blob)
        events.extend(found)
        diagnostics[Path(info.path).name] = info.diagnostics
    return with_collective_mismatches(events), diagnostics


def mismatches(paths: list[Path]) -> list[Event]:
    return [e for e in read(paths)[0] if e.kind == "collective-mismatch"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_suspect_and_mismatch_are_fr_traces(scenario: str, fmt: str) -> None:
    expected = oracle(scenario)
    [found] = mismatches(sorted((DATA / scenario).glob(FORMATS[fmt])))
    fields = found.fields
    assert (fields["suspect_ranks"], fields["mismatch"], fields["seq"], fields["pg"], fields["pg_desc"]) == (
        expected.suspects, expected.mismatch, expected.seq, expected.pg, expected.pg_desc)
    if expected.expected is not None:
        assert fields["expected"].endswith(f" {expected.expected}") or fields["expected"] == expected.expected
        assert fields["found"].endswith(f" {expected.found}") or fields["found"] == expected.found
    # Gloo's recorder stamps creation only (state "scheduled" throughout): no figure of how long the others waited
    assert fields["ranks_total"] == 4 and "waited_s" not in fields and "waited" not in found.text
    if fmt == "pickle":  # JSON dumps hold no stack frames
        assert fields["others_caller"] == expected.caller


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_dump_event_says_how_far_each_group_got(scenario: str) -> None:
    events, diagnostics = read(sorted((DATA / scenario).glob("fr_json_rank_*.json")))
    dumps = {e.fields["rank"]: e for e in events if e.kind == "flight-recorder"}
    assert sorted(dumps) == [0, 1, 2, 3]
    # only an empty dump is said (`never`: rank 3's), and not as a recorder that was off
    said = {name: words for name, words in diagnostics.items() if words}
    assert said == ({"fr_json_rank_3.json": said.get("fr_json_rank_3.json")} if scenario == "never" else {})
    assert all("the rank reached no collective" in words[0] for words in said.values())
    for rank, event in dumps.items():
        raw = json.loads((DATA / scenario / f"fr_json_rank_{rank}.json").read_text())
        assert event.fields["version"] == raw["version"] and "entries" not in event.fields
        assert {pg: (g["enqueued"], g["started"], g["completed"]) for pg, g in event.fields["groups"].items()} == {
            pg: tuple(int(s[f"last_{k}_collective"]) for k in ("enqueued", "started", "completed"))
            for pg, s in raw["pg_status"].items()}
        if not raw.get("entries"):  # `never`: rank 3 reached no collective (the JSON leaves the key out)
            assert "last_op" not in event.fields and event.fields["entry_count"] == 0
            continue
        last = raw["entries"][-1]  # a barrier's entry has no sizes: the field is left out, as every empty value
        assert (event.fields["last_op"], event.fields["last_seq"], event.fields.get("last_input_sizes", [])) == (
            last["profiling_name"].split(":")[1], last["collective_seq_id"], last["input_sizes"])


def test_pickle_dump_names_the_users_frame() -> None:
    events, _ = read([DATA / "skip" / "nccl_trace_rank_2"])
    [dump] = [e for e in events if e.kind == "flight-recorder"]
    raw = loads((DATA / "skip" / "nccl_trace_rank_2").read_bytes())
    assert isinstance(raw, dict)
    user = next(f for f in raw["entries"][-1]["frames"] if "/torch/" not in f["filename"])
    assert dump.fields["last_caller"] == f"{user['name']} (make_dumps.py:{user['line']})"
    assert not [e for e in events if e.kind == "collective-mismatch"]  # one rank alone is compared with nobody


def _analyze(*args: str) -> str:
    result = CliRunner().invoke(main, ["analyze", *args])
    assert result.exit_code == 0, result.output
    assert result.exception is None, result.exception  # fr_trace's own traceback in the folder is evidence, not ours
    return result.output


def test_cli_verdict_names_the_rank_and_the_mismatch() -> None:
    output = _analyze(str(DATA / "skip"))
    verdict = " ".join(output.split("What to do:")[0].split())  # the report wraps its lines
    assert "flight-recorder-op-mismatch" in verdict
    assert "rank 2 called broadcast" in verdict and "ranks 0-1, 3 called all_reduce" in verdict
    assert "seq 5" in verdict and "make_dumps.py:" in verdict
    report = json.loads(_analyze("--format", "json", str(DATA / "skip")))
    assert report["findings"][0]["signature"] == "flight-recorder-op-mismatch"


def test_watchdog_line_of_the_same_collective_is_told_the_suspect(tmp_path: Path) -> None:
    for dump in (DATA / "skip").glob("nccl_trace_rank_*"):
        shutil.copy(dump, tmp_path)
    (tmp_path / "rank0.log").write_text(
        "[rank0]:[E1201 16:52:37.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=3000) ran for 3001 "
        "milliseconds before timing out.\n")
    events, _ = read([tmp_path])
    [timeout] = [e for e in events if e.kind == "nccl-timeout"]
    [mismatch] = [e for e in events if e.kind == "collective-mismatch"]
    assert timeout.fields["suspect_ranks"] == "2" and timeout.fields["mismatch"] == "op"
    assert mismatch.fields["watchdog_ranks"] == "0"
    assert "rank 2 called broadcast" in " ".join(_analyze(str(tmp_path)).split("What to do:")[0].split())


class Payload:
    """Unpickled by pickle.load, this would run a shell command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("protocol", [2, 4])
def test_hostile_pickle_runs_nothing(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "ran"
    folder = tmp_path / "dumps"
    shutil.copytree(DATA / "sleep", folder)
    dump = loads((folder / "nccl_trace_rank_0").read_bytes())
    assert isinstance(dump, dict)
    dump["entries"][0]["frames"] = [Payload(marker)]
    (folder / "nccl_trace_rank_0").write_bytes(pickle.dumps(dump, protocol=protocol))
    _, diagnostics = read([folder])
    assert not marker.exists()
    assert any("not read" in note and "system" in note and "nothing in it was run" in note
               for note in diagnostics["nccl_trace_rank_0"])
    [found] = mismatches([folder])  # ranks 1 and 2, and the JSON dump of rank 0, still show rank 3 missing
    assert found.fields["suspect_ranks"] == "3" and found.fields["mismatch"] == "missing"
    assert "Traceback" not in _analyze(str(folder)) and not marker.exists()


@pytest.mark.parametrize("fmt", FORMATS)
def test_truncated_dump_is_a_diagnostic_and_the_rest_still_concludes(tmp_path: Path, fmt: str) -> None:
    source = next((DATA / "sleep").glob(FORMATS[fmt].replace("[0-9]", "0")))
    data = source.read_bytes()
    for cut in (10, 100, len(data) // 2, len(data) - 1):
        folder = tmp_path / str(cut)
        folder.mkdir()
        for dump in (DATA / "sleep").glob(FORMATS[fmt]):
            shutil.copy(dump, folder)
        (folder / source.name).write_bytes(data[:cut])
        events, diagnostics = read([folder])
        assert 0 not in [e.fields["rank"] for e in events if e.kind == "flight-recorder"]
        notes = diagnostics[source.name]
        # cut before any key of a dump it is data of no known format; after one, a dump that was cut
        assert any("not read" in note for note in notes) if cut >= 100 else notes, (cut, notes)
        [found] = mismatches([folder])
        assert (found.fields["suspect_ranks"], found.fields["other_ranks"]) == ("3", "ranks 1-2")


def _rewrite(path: Path, version: str, renamed: dict[str, str], dropped: tuple[str, ...],
             added: dict[str, object]) -> None:
    dump = loads(path.read_bytes())
    assert isinstance(dump, dict)
    dump["version"] = version
    for key in dropped:
        dump.pop(key, None)
    for entry in dump["entries"]:
        for key in dropped:
            entry.pop(key, None)
        for old, new in renamed.items():
            entry[new] = entry.pop(old)
        entry.update(added)
    path.write_bytes(pickle.dumps(dump, protocol=2))


def test_mixed_versions(tmp_path: Path) -> None:
    """Rank 0 as a 2.4 recorder wrote it, rank 1 of an unknown 9.0, rank 2 of 1.x (seq_id): 9.0 is named and left
    out; the others still show rank 3 missing from seq 5."""
    for dump in (DATA / "sleep").glob("nccl_trace_rank_*"):
        shutil.copy(dump, tmp_path)
    _rewrite(tmp_path / "nccl_trace_rank_0", "2.4", {}, ("thread_id", "thread_name", "comm_lib_version"),
             {"duration_ms": 1.5})
    _rewrite(tmp_path / "nccl_trace_rank_1", "9.0", {}, (), {})
    _rewrite(tmp_path / "nccl_trace_rank_2", "1.9", {"collective_seq_id": "seq_id"}, ("p2p_seq_id",), {})
    events, diagnostics = read([tmp_path])
    assert not diagnostics["nccl_trace_rank_0"] and not diagnostics["nccl_trace_rank_2"]
    [note] = diagnostics["nccl_trace_rank_1"]
    assert "'9.0'" in note and "not know" in note
    versions = {e.fields["rank"]: e.fields["version"] for e in events if e.kind == "flight-recorder"}
    assert versions == {0: "2.4", 1: "9.0", 2: "1.9", 3: "2.10"}
    [found] = [e for e in events if e.kind == "collective-mismatch"]
    assert (found.fields["suspect_ranks"], found.fields["other_ranks"], found.fields["seq"]) == ("3", "ranks 0, 2", 5)


def test_dump_without_entries_says_so(tmp_path: Path) -> None:
    dump = json.loads((DATA / "skip" / "fr_json_rank_0.json").read_text())
    dump["entries"] = []
    (tmp_path / "fr_json_rank_0.json").write_text(json.dumps(dump))
    events, diagnostics = read([tmp_path])
    assert "holds no entries" in diagnostics["fr_json_rank_0.json"][0]
    assert [e.fields["rank"] for e in events if e.kind == "flight-recorder"] == [0]


def test_a_log_that_mentions_the_keys_is_no_dump(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("we grep for collective_seq_id and profiling_name in the dumps\n")
    events, diagnostics = read([tmp_path])
    assert not [e for e in events if e.kind == "flight-recorder"] and "flight" not in str(diagnostics)


RANKS = 6_000
ALIGN_CPU_S = 1.0
"""CPU seconds lining up RANKS one-entry dumps may take: 0.12-0.17 s on a 2-core VM with the ranks indexed by
group and sequence number; comparing every member at every sequence number took 2.2 s (one group) and 10.9 s (a
group per pair of ranks)."""


def write_rank_dumps(folder: Path, layout: str) -> None:
    """RANKS JSON dumps in the layout of sleep/fr_json_rank_0.json, one entry each, no two ranks with one
    (group, seq). `seqs`: one group, rank r in seq r + 1, every rank's pg_status past them all but rank 0's, one
    short: rank 0 never entered the last. `pairs`: a group per two ranks, the even one in seq 1 and stopped there,
    the odd one in seq 2."""
    template = json.loads((DATA / "sleep" / "fr_json_rank_0.json").read_text())
    folder.mkdir()
    for rank in range(RANKS):
        pg, seq = ("0", rank + 1) if layout == "seqs" else (str(rank // 2), rank % 2 + 1)
        enqueued = (RANKS - (rank == 0)) if layout == "seqs" else seq
        dump = {**template, "pg_status": {pg: {"last_enqueued_collective": str(enqueued),
                                               "last_started_collective": "-1",
                                               "last_completed_collective": str(enqueued)}},
                "entries": [{**template["entries"][0], "process_group": [pg, "default_pg"],
                             "collective_seq_id": seq}]}
        (folder / f"fr_json_rank_{rank}.json").write_text(json.dumps(dump))


@pytest.mark.parametrize("layout", ["seqs", "pairs"])
def test_six_thousand_ranks_are_aligned_in_linear_time(tmp_path: Path, layout: str) -> None:
    write_rank_dumps(tmp_path / "dumps", layout)
    events: list[Event] = []
    for blob in open_inputs([str(tmp_path / "dumps")]):
        events.extend(read_blob(blob)[1])
    assert len(events) == RANKS
    started = time.process_time()
    found = [e for e in with_collective_mismatches(events) if e.kind == "collective-mismatch"]
    spent = time.process_time() - started
    if layout == "seqs":
        [only] = found
        assert (only.fields["suspect_ranks"], only.fields["mismatch"], only.fields["seq"]) == ("0", "missing", RANKS)
    else:
        assert len(found) == RANKS // 2
        assert {e.fields["suspect_ranks"] for e in found} == {str(rank) for rank in range(0, RANKS, 2)}
    assert spent < ALIGN_CPU_S, spent


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_dumps_of_one_job_in_a_folder_per_node_are_aligned_as_one(tmp_path: Path, scenario: str) -> None:
    """Each node writes the dumps of its own ranks: two folders of disjoint ranks are one job; two folders of the
    same ranks are two jobs (two scenarios here), each with its own conclusion."""
    for node, ranks in (("node-a", (0, 1)), ("node-b", (2, 3))):
        (tmp_path / node).mkdir()
        for rank in ranks:
            shutil.copy(DATA / scenario / f"nccl_trace_rank_{rank}", tmp_path / node)
    [found] = mismatches([tmp_path / "node-a", tmp_path / "node-b"])
    assert (found.fields["suspect_ranks"], found.fields["seq"]) == (oracle(scenario).suspects, oracle(scenario).seq)
    both = mismatches([DATA / "skip", DATA / "sleep"])
    assert sorted(e.fields["suspect_ranks"] for e in both) == sorted([oracle("skip").suspects,
                                                                      oracle("sleep").suspects])


ABSURD_NUMBER = "9" * 6_021
"""A 20,000-bit number written out: Python's int() and str() refuse numbers of over 4,300 digits."""


def _with_one_absurd_value(folder: Path, fmt: str, field: str, value: object) -> Path:
    """The sleep job's dumps of `fmt` in `folder`, rank 0's holding one absurd value: the dump's version, or the
    sequence number of one more entry (a copy of its first) after its good ones. In JSON `value` is the text
    written: a number JSON holds that Python would not read whole."""
    folder.mkdir()
    for written in (DATA / "sleep").glob(FORMATS[fmt]):
        shutil.copy(written, folder)
    path = next(folder.glob(FORMATS[fmt].replace("[0-9]", "0")))
    dump = loads(path.read_bytes()) if fmt == "pickle" else json.loads(path.read_text())
    assert isinstance(dump, dict)
    placed = value if fmt == "pickle" else "@absurd@"
    if field == "version":
        dump["version"] = placed
    else:
        dump["entries"].append({**dump["entries"][0], "collective_seq_id": placed})
    if fmt == "pickle":
        path.write_bytes(pickle.dumps(dump, protocol=2))
    else:
        path.write_text(json.dumps(dump).replace('"@absurd@"', str(value)))
    return path


@pytest.mark.parametrize(("fmt", "field", "value"), [
    ("pickle", "seq", 2**20_000),
    ("json", "seq", ABSURD_NUMBER),
    ("json", "seq", "Infinity"),
    ("pickle", "seq", -1.5),
], ids=["pickle-20000-bits", "json-20000-bits", "json-infinity", "pickle-float"])
def test_entry_with_an_absurd_sequence_number_is_dropped_alone(tmp_path: Path, fmt: str, field: str,
                                                               value: object) -> None:
    path = _with_one_absurd_value(tmp_path / "dumps", fmt, field, value)
    events, diagnostics = read([tmp_path / "dumps"])
    [note] = diagnostics[path.name]
    assert "1 flight-recorder entry of rank 0 dropped" in note and "sequence number" in note, note
    [dump] = [e for e in events if e.kind == "flight-recorder" and e.fields["rank"] == 0]
    assert (dump.fields["entry_count"], dump.fields["last_seq"]) == (5, 5)
    [found] = [e for e in events if e.kind == "collective-mismatch"]
    assert (found.fields["suspect_ranks"], found.fields["other_ranks"]) == ("3", "ranks 0-2")  # rank 0 compared
    report = " ".join(_analyze(str(tmp_path / "dumps")).split())
    assert "ranks 0-2 entered all_reduce (group 0 default_pg, seq 5)" in report and "entry of rank 0 dropped" in report


@pytest.mark.parametrize(("fmt", "value", "shown"), [
    ("pickle", 2**20_000, "20,001-bit number"),
    ("json", ABSURD_NUMBER, "'9999999999999999999999999999999999999999'... (6,021 characters)"),
    ("json", json.dumps("2.\u00b2"), "'2.\u00b2'"),
    ("pickle", "2." + "9" * 5_000, "'2.999"),
], ids=["pickle-20000-bits", "json-20000-bits", "json-superscript-minor", "pickle-5000-digit-minor"])
def test_dump_with_an_absurd_version_keeps_its_progress(tmp_path: Path, fmt: str, value: object, shown: str) -> None:
    """The version says which keys the entries have: one that is no version is an unknown version (entries not
    compared, as for 9.0), the rest of the dump (its rank, how far each group got) still read."""
    path = _with_one_absurd_value(tmp_path / "dumps", fmt, "version", value)
    events, diagnostics = read([tmp_path / "dumps"])
    [note] = diagnostics[path.name]
    assert shown in note and "does not know" in note and len(note) < 300, note
    [dump] = [e for e in events if e.kind == "flight-recorder" and e.fields["rank"] == 0]
    assert dump.fields["groups"]["0"]["enqueued"] == 5 and len(dump.fields["version"]) < 100
    [found] = [e for e in events if e.kind == "collective-mismatch"]
    assert (found.fields["suspect_ranks"], found.fields["other_ranks"]) == ("3", "ranks 1-2")


def test_rank_of_5000_digits_in_a_member_name_keeps_the_dump(tmp_path: Path) -> None:
    """A tar member's name may be as long as PAX allows: a rank no job has is no rank, and the dump is still read."""
    with tarfile.open(tmp_path / "dumps.tar", "w", format=tarfile.PAX_FORMAT) as archive:
        for rank in (0, 2, 3):
            archive.add(DATA / "sleep" / f"nccl_trace_rank_{rank}", arcname=f"dumps/nccl_trace_rank_{rank}")
        archive.add(DATA / "sleep" / "nccl_trace_rank_1", arcname="dumps/nccl_trace_rank_" + "7" * 5_000)
    events, diagnostics = read([tmp_path / "dumps.tar"])
    [unranked] = [e for e in events if e.kind == "flight-recorder" and e.fields.get("rank") is None]
    assert "last entry: all_reduce [[8]] Float" in unranked.text and unranked.fields["last_seq"] == 5
    [note] = [n for name, notes in diagnostics.items() if name.endswith("77777") for n in notes]
    assert "5,000 digits" in note and "not lined up" in note, note
    [found] = [e for e in events if e.kind == "collective-mismatch"]
    assert (found.fields["suspect_ranks"], found.fields["other_ranks"]) == ("3", "ranks 0, 2")


def test_a_rank_that_never_reached_a_collective_is_the_one_missing() -> None:
    """`never`: rank 3 spun in Python before its first collective; its recorder was on and its dump is empty (the
    JSON dumper then leaves `entries` out). fr_trace names it missing from seq 1; so must the verdict."""
    for fmt, pattern in FORMATS.items():
        [found] = mismatches(sorted((DATA / "never").glob(pattern)))
        fields = found.fields
        assert (fields["suspect_ranks"], fields["mismatch"], fields["seq"]) == ("3", "missing", 1), fmt
        assert "rank 3 recorded no collective at all" in found.fields["found"]
    output = " ".join(_analyze(str(DATA / "never")).split())
    assert output.startswith("Verdict: nccl-timeout") and "rank 3 recorded no collective at all" in output


def test_a_dump_that_ends_in_a_barrier_is_read_and_lined_up() -> None:
    """`barrier`: ranks 0-2's last entry is a Gloo barrier, which has no sizes or dtypes."""
    events, diagnostics = read(sorted((DATA / "barrier").glob("nccl_trace_rank_[0-9]")))
    assert not any(diagnostics.values())
    assert {e.fields["rank"]: e.fields["last_op"] for e in events if e.kind == "flight-recorder"} == {
        0: "barrier", 1: "barrier", 2: "barrier", 3: "all_reduce"}
    [found] = [e for e in events if e.kind == "collective-mismatch"]
    assert (found.fields["suspect_ranks"], found.fields["op"], found.fields["seq"]) == ("3", "barrier", 5)
