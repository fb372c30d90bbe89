"""`postmortem scan`, `postmortem buckets`, `postmortem report`: the fleet commands.

Only click and the terminal gate (which `postmortem.cli` loads anyway) are
imported here; the scan machinery, pandas and dask are imported when a command
runs, so `postmortem analyze` never pays for them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from typing import TYPE_CHECKING

import click

from ..render.terminal import echo, reply
from .cases import CASE_MODES

if TYPE_CHECKING:
    import sqlite3

DEFAULT_DB = "postmortem.sqlite"


@click.command("scan")
@click.argument("path", type=click.Path(exists=True))
@click.option("--db", default=DEFAULT_DB, show_default=True, type=click.Path(dir_okay=False),
              help="SQLite store; created if missing. Re-running only analyses new or changed cases.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Worker processes (local engine) or LocalCluster "
                   "workers (dask without --scheduler); default: all cores.")
@click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="Where the per-case analysis runs: local processes, or a dask.distributed cluster.")
@click.option("--scheduler", default=None, metavar="ADDR",
              help="dask.distributed scheduler, e.g. tcp://10.0.0.5:8786 (workers must see PATH); "
                   "default with --engine dask: a local cluster.")
@click.option("--case-mode", type=click.Choice(list(CASE_MODES)), default="dir", show_default=True,
              help="What one case is: " + "; ".join(f"{k}: {v}" for k, v in CASE_MODES.items()) + ".")
@click.option("--force", is_flag=True, help="Analyse every case again, even unchanged ones (after an upgrade).")
@click.option("--export", "export_format", type=click.Choice(["csv", "parquet"]), default=None,
              help="After the scan, write every table of the store to -o DIR as <table>.csv or <table>.parquet.")
@click.option("-o", "--output", type=click.Path(file_okay=False), default=None,
              help="Directory for --export.")
def scan_command(path: str, db: str, jobs: int | None, engine: str, scheduler: str | None, case_mode: str,
                 force: bool, export_format: str | None, output: str | None) -> None:
    """Analyse every case under PATH into a SQLite store (parallel; resumable after Ctrl-C or a kill).

    One case that cannot be analysed is recorded with its diagnostic and the
    scan goes on. Progress (cases done, rate, ETA) is shown on stderr when it
    is a terminal; a summary is printed at the end.
    """
    from ..cli import output_step
    from ..outputs import check_folder_output
    from .scan import ScanError, scan
    from .store import StoreError, export

    if scheduler and engine != "dask":
        raise click.UsageError("--scheduler needs --engine dask")
    if export_format and not output:
        raise click.UsageError("--export needs -o DIR")
    folder = output or ""  # set whenever export_format is: checked above
    if export_format:  # checked before the scan; inside PATH its tables would become cases of the next one
        output_step(lambda: check_folder_output(folder, [path]))
    try:
        summary = scan(path, db, jobs=jobs, engine=engine, scheduler=scheduler, case_mode=case_mode, force=force,
                       progress=sys.stderr)
    except (ScanError, StoreError) as exc:
        raise click.UsageError(str(exc)) from exc
    for line in summary.lines():
        echo(line)
    if summary.interrupted:
        sys.exit(130)
    if export_format:
        try:
            for written in export(db, export_format, folder):
                echo(f"wrote {written}")
        except StoreError as exc:
            raise click.UsageError(str(exc)) from exc


@click.command("buckets")
@click.option("--db", default=DEFAULT_DB, show_default=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--cases", "bucket", default=None, metavar="BUCKET",
              help="List the cases of one bucket (its key as the bucket column prints it) with their paths.")
def buckets_command(db: str, fmt: str, bucket: str | None) -> None:
    """Cases grouped: by cause and signature, native crashes by stack signature, unknowns by fingerprint."""
    from .buckets import bucket_cases, buckets, format_cases, format_text

    with _reading(db) as conn:
        if bucket is not None:
            rows = bucket_cases(conn, bucket)
        else:
            found, errors = buckets(conn)
    if bucket is None:
        reply(json.dumps({"buckets": [b.plain() for b in found], "errors": errors}, indent=2,
                         ensure_ascii=False) if fmt == "json" else format_text(found, errors), data=fmt == "json",
              nl=fmt == "json")
    elif not rows:
        raise click.UsageError(f"no bucket {bucket!r} in {db}; `postmortem buckets --db {db}` lists the keys")
    else:
        reply(json.dumps({"bucket": bucket, "cases": [r.plain() for r in rows]}, indent=2, ensure_ascii=False)
              if fmt == "json" else format_cases(bucket, rows), data=fmt == "json", nl=fmt == "json")


def _iso_date(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A date or time as the store writes times (naive UTC ISO), or a usage error that says the form."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value).isoformat(timespec="seconds") if "T" in value or " " in value \
            else date.fromisoformat(value).isoformat()
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date: write YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None


@click.command("report")
@click.option("--db", default=DEFAULT_DB, show_default=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, writable=True),
              help="The HTML file to write.")
@click.option("--title", default="Fleet report", show_default=True)
@click.option("--since", metavar="DATE", callback=_iso_date, help="Draw the chart from this date (YYYY-MM-DD[THH:MM]).")
@click.option("--until", metavar="DATE", callback=_iso_date, help="Draw the chart up to this date, included.")
def report_command(db: str, output: str, title: str, since: str | None, until: str | None) -> None:
    """The fleet report as one self-contained HTML page: trends, bad nodes, card or slot, versions, buckets."""
    from ..cli import checked_output, output_step
    from ..outputs import write_text_output
    from .report import render

    target = checked_output(output, [db])
    with _reading(db) as conn:
        html = render(conn, title, since, until)
    output_step(lambda: write_text_output(target, html))
    echo(f"wrote {output}")


@contextmanager
def _reading(db: str) -> Iterator[sqlite3.Connection]:
    """The store at `db`, read-only, closed after use; what SQLite cannot read in it meanwhile (a damaged
    page) is a StoreError: one sentence, exit 2."""
    from .store import connect, guarded

    with guarded(db):
        conn = connect(db, readonly=True)
        try:
            yield conn
        finally:
            conn.close()



fleet_group = click.Group("fleet", commands=[scan_command, buckets_command, report_command], help=(
    "The fleet's commands under one name: `postmortem fleet scan`, `fleet buckets` and `fleet report` are "
    "`postmortem scan`, `buckets` and `report`."))
