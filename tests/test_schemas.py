"""The JSON Schemas of the outputs (postmortem/schemas/*.json) hold for real outputs and stay in step with the code.

Every sample, every corpus case and every committed test input (tests/data) analysed to JSON must validate against
analyze.schema.json; `gpu-arch --format json` over the real nvcc builds of tests/data/fatbin against
gpu-arch.schema.json; a scan of tests/corpus, its export and its buckets against scan-export.schema.json and
buckets.schema.json. Hand-broken documents must not validate, and every field of the dataclasses a schema
mirrors, every closed vocabulary of the code and every column of the store must appear in it.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import sqlite3
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from helpers import GIVEN
from postmortem import facts, model, signatures
from postmortem.binaries import fatbin
from postmortem.cli import main
from postmortem.core import gpu, report, unwind
from postmortem.core.python_stack import PythonFrame
from postmortem.fleet import buckets, store
from postmortem.fleet.scan import scan
from postmortem.pipeline import analyze
from postmortem.render import json_report
from test_core import python_core  # noqa: F401 - the fixture: a real core of this interpreter under faulthandler

HERE = Path(__file__).parent
ROOT = HERE.parent
SCHEMAS = ("analyze", "gpu-arch", "scan-export", "buckets")


@cache
def schema(name: str) -> dict[str, Any]:
    """A schema as the installed package ships it."""
    text = resources.files("postmortem").joinpath(f"schemas/{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def validator(name: str) -> Draft202012Validator:
    """A validator that resolves references between the shipped schemas (`analyze.schema.json#/$defs/cause`)."""
    registry: Registry = Registry().with_resources(
        (schema(other)["$id"], Resource.from_contents(schema(other))) for other in SCHEMAS)
    return Draft202012Validator(schema(name), registry=registry)


def problems(name: str, document: Any) -> list[str]:
    """Every way `document` breaks schema `name`, as 'path: message' (the first 5)."""
    found = sorted(validator(name).iter_errors(document), key=lambda e: e.json_path)
    return [f"{e.json_path}: {e.message[:200]}" for e in found[:5]]


@cache
def analysed(*paths: str) -> dict[str, Any]:
    """The report exactly as `--format json` prints it (through the renderer's encoder); not to be changed."""
    return json.loads(json_report.render(analyze(list(paths))))


NOT_INPUTS = frozenset({".md", ".py", ".sh", ".c", ".cc", ".cu", ".go", ".rs"})
"""Suffixes of the files under tests/data that document or build the inputs: SOURCES.md, generators, programs."""


def _cases() -> list[tuple[str, list[str]]]:
    """(name, inputs) of every sample, corpus case and committed test input (cores, telemetry, logs, fatbins)."""
    found = [(f"samples/{p.name}", [str(p)]) for p in sorted((ROOT / "samples").iterdir()) if p.is_dir()]
    for corpus in (HERE / "corpus", HERE / "heldout", GIVEN / "corpus" / "cases"):
        for case in sorted(p.parent for p in corpus.rglob("case.yaml")) if corpus.is_dir() else []:
            files = sorted(str(p) for p in case.iterdir() if p.is_file() and p.name != "case.yaml")
            found.append((f"{corpus.parent.name}/{case.name}", files))
    data = HERE / "data"
    found += [(str(p.relative_to(HERE)), [str(p)]) for p in sorted(data.rglob("*"))
              if p.is_file() and p.suffix not in NOT_INPUTS]
    return found


CASES = _cases()


def test_the_schemas_are_valid_draft_2020_12() -> None:
    for name in SCHEMAS:
        Draft202012Validator.check_schema(schema(name))
        assert schema(name)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize(("name", "inputs"), CASES, ids=[name for name, _ in CASES])
def test_every_analysis_validates(name: str, inputs: list[str]) -> None:
    assert problems("analyze", analysed(*inputs)) == []


def test_the_cases_reach_every_part_of_the_analyze_schema() -> None:
    """The corpus and committed files give findings, GPU facts, cores and telemetry: none of it goes unchecked."""
    documents = [analysed(*inputs) for _, inputs in CASES]
    assert all(any(d[part] for d in documents) for part in ("findings", "events", "cores", "telemetry", "suspects"))
    assert any(d["facts"].get("gpus") for d in documents)
    assert any(m["kind"] == "nvidia-driver" for d in documents for c in d["cores"] for m in c["modules"])


def test_a_live_python_core_validates(python_core: Path) -> None:  # noqa: F811 - the fixture of test_core
    document = analysed(str(python_core))
    assert problems("analyze", document) == []
    (core,) = document["cores"]
    assert core["original_fault"] is not None
    assert any(t["python_frames"] for t in core["threads"])
    assert any(f["python_frames"] for t in core["threads"] for f in t["frames"])


GPU_ARCH_RUNS = ([], ["--target", "sm_120"], ["--target", "sm_37"], ["--target", "sm_90", "--kernels"],
                 ["--target", "RTX 5090", "--driver", "535.54.03"], ["--target", "sm_80", "--driver", "580.82.07"])


@pytest.mark.parametrize("options", GPU_ARCH_RUNS, ids=[" ".join(o) or "no-target" for o in GPU_ARCH_RUNS])
def test_gpu_arch_json_validates(options: list[str]) -> None:
    result = CliRunner().invoke(main, ["gpu-arch", *options, "--format", "json", str(HERE / "data" / "fatbin")])
    document = json.loads(result.output)
    assert document["libraries"] and problems("gpu-arch", document) == []


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/corpus scanned into a fresh store."""
    db = tmp_path_factory.mktemp("schema-scan") / "fleet.sqlite"
    summary = scan(str(HERE / "corpus"), db, jobs=2)
    assert summary.analysed > 0
    return db


def exported(db: Path) -> dict[str, list[dict[str, Any]]]:
    """The tables `scan --export` writes, as rows (SQL NULL, which pandas reads as NaN, as null)."""
    return {name: [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
                   for row in frame.to_dict("records")] for name, frame in store.load(db).tables().items()}


def test_the_scan_export_validates(scanned: Path) -> None:
    tables = exported(scanned)
    assert all(tables[name] for name in store.TABLES)
    assert problems("scan-export", tables) == []


def test_exported_csv_columns_are_the_schema_columns_in_order(scanned: Path, tmp_path: Path) -> None:
    written = store.export(scanned, "csv", tmp_path)
    assert [p.stem for p in written] == list(store.TABLES)
    for path in written:
        with path.open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle))
        assert header == list(schema("scan-export")["$defs"][path.stem]["properties"]), path.name


def test_buckets_json_validates(scanned: Path) -> None:
    result = CliRunner().invoke(main, ["buckets", "--db", str(scanned), "--format", "json"])
    document = json.loads(result.output)
    assert document["buckets"] and problems("buckets", document) == []


# --------------------------------------------------------------- hand-broken documents fail


def _broken(document: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(document))
    place = copy
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return copy


BREAKS = {
    # what is broken: (path into the document, the wrong value)
    "confidence as a string": (("findings", 0, "confidence"), "0.6"),
    "confidence above 1": (("verdict", "confidence"), 1.5),
    "unknown severity": (("findings", 0, "severity"), "fatal"),
    "cause outside causes.yaml": (("findings", 0, "cause"), "cosmic-rays"),
    "line as a string": (("events", 0, "source", "line"), "3"),
    "frame found by magic": (("cores", 0, "threads", 0, "frames", 1, "how"), "magic"),
    "module kind outside gpu.KINDS": (("cores", 0, "modules", 0, "kind"), "gpu"),
    "address as a number": (("cores", 0, "threads", 0, "frames", 0, "pc"), 140482146968869),
    "a key no dataclass has": (("cores", 0, "signal", "errno"), 0),
}


@pytest.mark.parametrize("what", sorted(BREAKS))
def test_a_broken_analysis_does_not_validate(what: str) -> None:
    document = analysed(str(ROOT / "samples" / "native-crash-core"))
    path, value = BREAKS[what]
    assert problems("analyze", document) == []
    assert problems("analyze", _broken(document, path, value)) != []


def test_a_broken_gpu_arch_document_does_not_validate() -> None:
    result = CliRunner().invoke(main, ["gpu-arch", "--target", "sm_120", "--format", "json",
                                       str(HERE / "data" / "fatbin")])
    document = json.loads(result.output)
    for path, value in ((("libraries", 0, "verdict"), "maybe"), (("libraries", 0, "fatbins", 0, "offset"), "0x718"),
                        (("libraries", 0, "fatbins", 0, "entries", 0, "compression"), "gzip")):
        assert problems("gpu-arch", _broken(document, path, value)) != [], path


def test_a_broken_scan_export_does_not_validate(scanned: Path) -> None:
    tables = exported(scanned)
    for path, value in ((("cases", 0, "status"), "done"), (("findings", 0, "rank"), "1"),
                        (("facts", 0, "name"), "colour")):
        assert problems("scan-export", _broken(tables, path, value)) != [], path


# --------------------------------------------------------------- the schemas in step with the code


def _defs(name: str) -> dict[str, Any]:
    return schema(name)["$defs"]


MIRRORS = [
    # (dataclass, schema, $defs entry, {field: key it is written as}, fields left out of the JSON and why)
    (model.Finding, "analyze", "finding", {}, ()),
    (model.InputInfo, "analyze", "input", {}, ()),
    (model.Location, "analyze", "location", {}, ()),
    (model.Location, "analyze", "source", {}, ()),
    (model.Event, "analyze", "event",
     {"where": "source", "context_before": "context", "context_after": "context"}, ()),
    (model.GpuSeries, "analyze", "series", {"frame": "samples"}, ()),
    (report.Core, "analyze", "core", {}, ()),
    (report.Signal, "analyze", "signal", {}, ()),
    (report.Thread, "analyze", "thread", {}, ()),
    (report.Frame, "analyze", "frame", {}, ()),
    (report.InlineFrame, "analyze", "inline_frame", {}, ()),
    (report.ModuleInfo, "analyze", "module", {}, ()),
    (report.OriginalFault, "analyze", "original_fault", {}, ()),
    (PythonFrame, "analyze", "python_frame", {}, ()),
    (fatbin.Fatbin, "gpu-arch", "fatbin", {}, ()),
    (fatbin.Verdict, "gpu-arch", "detail", {}, ()),
    # sm and variant are spelled in `arch` (sm_90a); header_size only places the payload, which `offset` and
    # `size` already give a reader
    (fatbin.Entry, "gpu-arch", "entry", {"payload_size": "size"}, ("sm", "variant", "header_size")),
    (buckets.Bucket, "buckets", "bucket", {}, ()),
]


@pytest.mark.parametrize(("kind", "name", "entry", "renamed", "left_out"), MIRRORS,
                         ids=[f"{m[0].__name__}-{m[2]}" for m in MIRRORS])
def test_every_dataclass_field_is_in_the_schema(kind: type, name: str, entry: str, renamed: dict[str, str],
                                                left_out: tuple[str, ...]) -> None:
    properties = set(_defs(name)[entry]["properties"])
    wanted = {renamed.get(f.name, f.name) for f in dataclasses.fields(kind) if f.name not in left_out}
    assert wanted <= properties, f"{kind.__name__} fields missing from {name} $defs/{entry}: {wanted - properties}"


def test_report_and_its_verdict_are_the_top_level_keys() -> None:
    top = schema("analyze")
    wanted = {f.name for f in dataclasses.fields(model.Report)} | {"schema", "verdict"}
    assert set(top["properties"]) == set(top["required"]) == wanted
    assert top["properties"]["schema"]["const"] == json_report.SCHEMA_VERSION


def _enum(definition: dict[str, Any]) -> set[Any]:
    """The closed vocabulary of a property, its null left out."""
    return set(definition["enum"]) - {None}


def test_closed_vocabularies_are_the_codes_own() -> None:
    causes = yaml.safe_load((ROOT / "signatures" / "causes.yaml").read_text(encoding="utf-8"))["causes"]
    analyze_defs, arch_defs, export_defs = _defs("analyze"), _defs("gpu-arch"), _defs("scan-export")
    assert _enum(analyze_defs["cause"]) == set(causes)
    assert _enum(analyze_defs["severity"]) == set(model.SEVERITIES)
    assert _enum(analyze_defs["finding"]["properties"]["role"]) == set(signatures.ROLES)
    assert _enum(analyze_defs["module"]["properties"]["kind"]) == set(gpu.KINDS)
    assert set(unwind.GUESSES) < set(unwind.HOWS) == _enum(analyze_defs["frame"]["properties"]["how"])
    assert _enum(analyze_defs["facts"]["propertyNames"]) == {*facts.FACT_FIELDS, "gpus", "incidents"}
    assert set(analyze_defs["gpu"]["properties"]) == {key for key, _ in facts.GPU_KEYS}
    assert _enum(arch_defs["verdict"]) == {fatbin.NATIVE, fatbin.PTX_JIT, fatbin.MISSING, fatbin.NO_KERNELS}
    assert _enum(arch_defs["entry"]["properties"]["kind"]["anyOf"][0]) == set(fatbin.KINDS.values())
    assert _enum(export_defs["facts"]["properties"]["name"]) == set(facts.FACT_FIELDS)
    assert _enum(export_defs["findings"]["properties"]["layer"]) == {c["layer"] for c in causes.values()} | {""}


SQL_TYPES = {"TEXT": "string", "INTEGER": "integer", "REAL": "number"}


def test_every_store_column_is_in_the_export_schema(tmp_path: Path) -> None:
    """Each table and column of a fresh store, in order, with its SQL type; NOT NULL and key columns never null."""
    store.connect(tmp_path / "fresh.sqlite").close()
    defs = _defs("scan-export")
    assert list(schema("scan-export")["properties"]) == list(store.TABLES)
    with sqlite3.connect(tmp_path / "fresh.sqlite") as conn:
        for table in store.TABLES:
            columns = conn.execute(f"PRAGMA table_info({table})").fetchall()
            row = defs[table]
            assert list(row["properties"]) == row["required"] == [c[1] for c in columns], table
            for _cid, column, sql_type, not_null, _default, key in columns:
                spelled = row["properties"][column]
                spelled = defs[spelled["$ref"].split("/")[-1]] if "$ref" in spelled else spelled
                types = spelled.get("type", [])
                types = {types} if isinstance(types, str) else set(types)
                if types:
                    assert SQL_TYPES[sql_type] in types, (table, column)
                    assert ("null" not in types) == bool(not_null or key), (table, column)


def test_the_package_ships_its_schemas_and_type_marker() -> None:
    """What pyproject.toml ships beside the modules: the schemas and py.typed (PEP 561: the hints are for users)."""
    package = resources.files("postmortem")
    assert package.joinpath("py.typed").is_file()
    assert sorted(p.name for p in package.joinpath("schemas").iterdir()) == sorted(f"{n}.schema.json" for n in SCHEMAS)
