"""Speed guarded by counts that do not depend on the machine (issue 28): what `postmortem analyze` of a log with no
known line imports and compiles, and that the cards by which the pipeline picks sources without importing them say
what the sources say. A change that breaks one fails here with the number; timings live in benchmarks/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from postmortem import later
from postmortem.sources import card_of, source_cards, text_sources

ROOT = Path(__file__).resolve().parent.parent

_PROBE = """
import json, sys
compiles = []
if sys.argv[2] == "count":  # counting the regex module's compiles imports it: the plain probe tells whether we did
    import regex
    _compile = regex.compile
    regex.compile = lambda *args, **kwargs: compiles.append(1) or _compile(*args, **kwargs)
from postmortem import later
from postmortem.cli import main
sys.argv = ["postmortem", "analyze", "--format", sys.argv[3], sys.argv[1]]
try:
    main()
except SystemExit:
    pass
print(json.dumps({"modules": sorted(sys.modules), "compiled": later.compiled_count(), "regex_compiles": len(compiles)}),
      file=sys.stderr)
"""


def _probe(path: Path, cache: Path | None = None, counting: bool = True, fmt: str = "json") -> dict:
    """A fresh interpreter runs `postmortem analyze --format FMT PATH` and tells what it imported and compiled
    (`counting`: every regex.compile of the run too, which loads the regex module before postmortem does)."""
    env = {**os.environ, "POSTMORTEM_CACHE": str(cache) if cache else "off"}
    done = subprocess.run([sys.executable, "-c", _PROBE, str(path), "count" if counting else "plain", fmt],
                          capture_output=True, text=True, timeout=120, check=True, cwd=ROOT, env=env)
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_the_cards_are_what_the_sources_say():
    """data/source-cards.json is written by tools/gen_source_cards.py; a source whose anchors changed without it
    would be handed the wrong lines."""
    assert source_cards() == tuple(card_of(module) for module in text_sources())
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_source_cards.py"), "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, "run tools/gen_source_cards.py: the committed cards differ from the sources"


def test_a_log_with_nothing_known_imports_no_source_and_compiles_no_source_pattern(tmp_path):
    """The floor of start-up: a log none of whose lines holds an anchor imports no text source, nothing of triage,
    fleet, capture or the core reader (their commands are imported when named), no YAML parser where the cache
    holds the parsed files, and compiles no pattern at all, so that the regex module is not even loaded."""
    log = tmp_path / "quiet.log"
    log.write_text("epoch 1 loss 0.5\nepoch 2 loss 0.4\n", encoding="utf-8")
    _probe(log, tmp_path / "cache")  # a cold cache: built and kept
    seen = _probe(log, tmp_path / "cache")
    ours = [m for m in seen["modules"] if m.startswith("postmortem.")]
    sources = [m for m in ours if m.startswith("postmortem.sources.")]
    assert sources == [], sources
    heavy = [m for m in ours if m.split(".")[1] in ("fleet", "capture", "core", "binaries", "flight", "triage")]
    assert heavy == [], heavy
    assert not {"sqlite3", "pandas", "elftools", "jinja2", "socket", "pickle", "yaml"} & set(seen["modules"])
    # the regex module itself (a tenth of such a run) is loaded with the first pattern compiled: none here
    assert "regex" not in _probe(log, tmp_path / "cache", counting=False)["modules"]
    assert seen["compiled"] == 0, f"{seen['compiled']} patterns compiled for a log with no known line"
    # every regex.compile of the run, the signatures' own included: a database read back from the cache compiles a
    # signature's patterns when an event of its kind is met, never for a log with none (478 before)
    assert seen["regex_compiles"] == 0, f"{seen['regex_compiles']} regexes compiled for a log with no known line"


def test_a_log_reads_with_the_sources_its_anchors_name(tmp_path):
    """A kernel log's Xid line imports the kernel log's reader and what every log runs last (the readers of known
    codes and of error words), not the others."""
    log = tmp_path / "kern.log"
    log.write_text("[  100.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen "
                   "off the bus.\n", encoding="utf-8")
    seen = _probe(log)
    sources = {m.rsplit(".", 1)[-1] for m in seen["modules"] if m.startswith("postmortem.sources.")}
    assert "kernel_log" in sources
    assert not {"flight_recorder", "collect_bundle", "health_tests", "nvsmi_xml", "live_stacks"} & sources, sources


def test_every_lazy_pattern_compiles():
    """Patterns compile when first used: each one must still be a valid pattern, used or not."""
    for module in text_sources():
        assert module.NAME
    assert later.compile_all() > 400


def test_a_signature_is_tried_only_on_events_of_the_kinds_it_names():
    """Matching indexed by event kind (signatures.condition_kinds) finds what trying every signature on every event
    finds, with a small share of the condition calls."""
    import dataclasses

    from postmortem.pipeline import analyze
    from postmortem.signatures import Database, load_default, match

    calls = [0]

    def counted(condition):
        def test(event):
            calls[0] += 1
            return condition(event)
        return test

    database = load_default()
    events = [e for sample in sorted((ROOT / "samples").iterdir()) if sample.is_dir()
              for e in analyze([str(sample)]).events]
    indexed = Database(tuple(dataclasses.replace(s, condition=counted(s.condition)) for s in database.signatures),
                       database.causes, database.version)
    every = Database(tuple(dataclasses.replace(s, kinds=None) for s in database.signatures), database.causes,
                     database.version)
    assert [(f.signature, f.evidence) for f in match(indexed, events)] == \
        [(f.signature, f.evidence) for f in match(every, events)]
    assert len(events) >= 10 and calls[0] * 10 < len(events) * len(database.signatures), calls[0]


def test_the_benchmark_log_offers_the_parsers_few_candidate_lines(tmp_path):
    """The prefilter's selectivity on benchmarks/bench_scan.py's log (kernel and training noise, a real error line
    every ~20,000 lines): an anchor common in noise (`INFO`, a hex fragment) would hand the parsers thousands of lines
    per MB and cost most of the throughput."""
    import importlib.util

    from postmortem.pipeline import text_prefilter, text_repeats
    from postmortem.reader import FileReader
    from postmortem.text import TextDoc

    spec = importlib.util.spec_from_file_location("bench_scan", ROOT / "benchmarks" / "bench_scan.py",
                                                  submodule_search_locations=[])
    assert spec is not None and spec.loader is not None
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        bench_scan = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench_scan)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    log = tmp_path / "bench.log"
    megabytes = 8
    bench_scan.write_log(log, megabytes << 20)
    with open(log, "rb") as handle:
        doc = TextDoc(FileReader(handle), str(log))
        doc.scan(text_prefilter(), text_repeats())
    assert doc.candidate_lines / megabytes <= 10, f"{doc.candidate_lines / megabytes:.1f} candidate lines per MB"


_CORE_PROBE = """
import json, sys
from postmortem.cli import main
sys.argv = ["postmortem", "analyze", "--format", "json", "-o", sys.argv[2], sys.argv[1]]
try:
    main()
except SystemExit:
    pass
from postmortem.core import lines
print(json.dumps(lines.PARSED), file=sys.stderr)
"""


def test_a_second_look_at_a_core_parses_no_dwarf(tmp_path):
    """The lines and inlined frames of a build are kept in the user cache (core/lines.Answers): the second run on
    the same core parses no CU, line row or DIE, and its frames are the first run's, lines included."""
    import shutil

    from hostile import core_craft
    from test_core import DATA

    (tmp_path / "core").write_bytes(bytes(core_craft.committed("null-write")))
    for name in ("crash", "libcrash.so"):
        shutil.copy(DATA / name, tmp_path / name)
    env = {**os.environ, "POSTMORTEM_CACHE": str(tmp_path / "cache")}
    parsed, frames = [], []
    for run in ("cold", "warm"):
        out = tmp_path / f"{run}.json"
        done = subprocess.run([sys.executable, "-c", _CORE_PROBE, str(tmp_path / "core"), str(out)],
                              capture_output=True, text=True, timeout=120, check=True, cwd=ROOT, env=env)
        parsed.append(json.loads(done.stderr.strip().splitlines()[-1]))
        frames.append(json.loads(out.read_text())["cores"][0]["threads"][0]["frames"])
    assert parsed[0]["cus"] >= 1 and parsed[0]["rows"] >= 1, parsed[0]
    assert parsed[1] == {"cus": 0, "rows": 0, "dies": 0}, parsed[1]
    assert frames[1] == frames[0] and frames[0][0]["line"] == 3


def test_a_core_read_loads_no_regex_module_for_text_and_no_report_view_for_json(tmp_path):
    """A core's own patterns (module paths, variable names, the explanations' templates) are compiled by the standard
    library's engine (later.plain): read to text, a core loads no regex module (13-20 ms to import; a JSON report
    loads it for the fingerprints' masks). Read to JSON, it loads none of the view the HTML, Markdown and text
    reports share (nine dataclasses), which the terminal's helpers no longer import."""
    import shutil

    from hostile import core_craft
    from test_core import DATA

    (tmp_path / "core").write_bytes(bytes(core_craft.committed("null-write")))
    for name in ("crash", "libcrash.so"):
        shutil.copy(DATA / name, tmp_path / name)
    _probe(tmp_path / "core", tmp_path / "cache", counting=False, fmt="text")  # a cold cache: built and kept
    text = _probe(tmp_path / "core", tmp_path / "cache", counting=False, fmt="text")
    assert "postmortem.core.analysis" in text["modules"]  # the core was read
    assert "regex" not in text["modules"]
    machine = _probe(tmp_path / "core", tmp_path / "cache", counting=False, fmt="json")
    assert "postmortem.core.analysis" in machine["modules"] and "postmortem.render.view" not in machine["modules"]


def test_the_fleet_views_read_indexes_and_summaries_not_every_case(tmp_path):
    """SQLite's own plan for the queries behind `buckets` and the report on an empty store: a bucket's first, last and
    oldest case are seeks in the index of the bucket key, the trend scans its hour index, the bad nodes find the
    hardware findings by layer (issue 28: 1M cases in 0.7 s, where every case through Python took 10.6 s)."""
    from postmortem.fleet import buckets, fleet
    from postmortem.fleet.store import connect

    conn = connect(tmp_path / "s.sqlite")
    key = ("gpu-oom", "gpu-oom", None, None)

    def plan(sql: str, args: tuple = ()) -> str:
        return " | ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args))

    seek = plan(f"SELECT MIN(time) FROM cases WHERE status = 'ok' AND {buckets._SAME_BUCKET} AND time > ''", key)
    assert "SEARCH cases USING" in seek and "cases_bucket_key" in seek, seek
    oldest = plan(f"SELECT id FROM cases WHERE status = 'ok' AND {buckets._SAME_BUCKET} AND time IS NOT NULL "
                  "ORDER BY time, id LIMIT 1", key)
    assert "SEARCH cases USING INDEX cases_bucket_key" in oldest, oldest
    hours = plan("SELECT substr(time, 1, 13), cause, COUNT(*) FROM cases WHERE status = 'ok' AND time IS NOT NULL "
                 "GROUP BY 1, 2")
    assert "cases_hour" in hours and "TEMP B-TREE FOR GROUP BY" not in hours, hours
    layer = plan("SELECT case_id FROM findings WHERE layer IN ('hardware', 'driver/hw')")
    assert "findings_layer" in layer, layer
    assert fleet.trend(conn).periods == () and buckets.buckets(conn) == ([], 0) and fleet.bad_nodes(conn) == []
    conn.close()
