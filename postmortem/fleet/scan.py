"""Scanning an archive of cases: the per-case function mapped over worker processes or a Dask cluster.

The scanning process is the store's only writer: results come back from the
workers and are committed in batches, one transaction each, so a scan stopped
by Ctrl-C or killed outright leaves every committed case whole, and the next
scan skips them (their files' change key is stored with them).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..deadline import Overtime, time_limit
from ..names import escaped_bytes
from ..render.terminal import is_terminal
from . import store
from .analysis import CaseResult, analyse_batch, analyse_case
from .cases import Case, discover

BATCH_CASES = 256
"""Most results per store transaction."""
BATCH_SECONDS = 1.0
"""Longest time a finished result waits before it is committed (what a kill can lose)."""
DASK_TASK_CASES = 32
"""Cases per Dask task: enough work per task that the scheduler's overhead stays small."""
CASE_SECONDS = 600.0
"""Longest one case may take in a worker process before it is stopped and stored as an error: the last line of
defence against an input no bound inside the pipeline foresaw (the rest of the scan, and its commits, go on)."""


class ScanError(Exception):
    """The scan cannot start (an engine is missing, the root does not exist)."""


@dataclass
class Summary:
    """What one scan did, for the closing lines and for tests."""

    found: int = 0
    unchanged: int = 0
    analysed: int = 0
    known: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    interrupted: bool = False
    seconds: float = 0.0

    def lines(self) -> list[str]:
        rate = self.analysed / self.seconds if self.seconds else 0.0
        lines = [f"{self.found} case(s) found: {self.analysed} analysed ({rate:.0f}/s), "
                 f"{self.unchanged} unchanged since the last scan, {self.known} already known under another path, "
                 f"{len(self.errors)} could not be analysed; {self.seconds:.1f} s"]
        lines += [f"  error: {path}: {why}" for path, why in self.errors[:20]]
        if len(self.errors) > 20:
            lines.append(f"  ... and {len(self.errors) - 20} more (cases with status 'error' in the store)")
        if self.interrupted:
            lines.append("interrupted: what was analysed is stored; run the same command again to resume")
        return lines


def scan(root: str | Path, db: str | Path, jobs: int | None = None, engine: str = "local",
         scheduler: str | None = None, case_mode: str = "dir", force: bool = False,
         progress: TextIO | None = None) -> Summary:
    """Analyse every new or changed case under `root` into the store at `db`.

    `jobs`: worker processes (default: every core); `engine`: "local" or "dask"
    (`scheduler`: a dask.distributed address, default a LocalCluster of `jobs`
    workers); `force` re-analyses unchanged cases too. Ctrl-C stops the scan
    after committing what is done; the Summary then says `interrupted`.
    """
    if not Path(root).exists():
        raise ScanError(f"{root}: no such file or directory")
    started = time.monotonic()
    conn = store.connect(db)
    summary = Summary()
    try:
        with store.guarded(db):  # a damaged page is met only when read
            cases = list(discover(root, case_mode))
            seen = {} if force else store.seen_locations(conn)
            todo = [case for case in cases if seen.get(escaped_bytes(case.path)) != case.stat_key]
            summary.found, summary.unchanged = len(cases), len(cases) - len(todo)
            known = frozenset() if force else store.known_digests(conn)
            jobs = max(1, jobs or os.cpu_count() or 1)
            results = _dask(todo, known, scheduler, jobs) if engine == "dask" else _local(todo, known, jobs)
            bar = Bar(len(todo), progress)
            try:
                _drain(results, conn, summary, bar)
            except KeyboardInterrupt:
                summary.interrupted = True
            finally:
                results.close()
                bar.close()
    finally:
        conn.close()
        summary.seconds = time.monotonic() - started
    return summary


def _drain(results: Iterator[CaseResult | None], conn, summary: Summary, bar: Bar) -> None:
    """Commit results in batches as they arrive (None: a tick with no result); a pending batch is committed even
    when interrupted."""
    pending: list[CaseResult] = []
    last = time.monotonic()
    try:
        for result in results:
            if result is None:  # a tick: nothing finished lately, but what did finish is committed on time
                if pending and time.monotonic() - last >= BATCH_SECONDS:
                    store.write(conn, pending)
                    pending, last = [], time.monotonic()
                continue
            pending.append(result)
            if result.status == "known":
                summary.known += 1
            else:
                summary.analysed += 1
            if result.status == "error":
                summary.errors.append((result.path, result.diagnostic))
            bar.step()
            if len(pending) >= BATCH_CASES or time.monotonic() - last >= BATCH_SECONDS:
                store.write(conn, pending)
                pending, last = [], time.monotonic()
    finally:
        with _sigint_deferred():
            store.write(conn, pending)


class _sigint_deferred:
    """Ctrl-C pressed during the last commit waits until it is done."""

    def __enter__(self) -> None:
        self.previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


# ---------------------------------------------------------------- engines

_KNOWN: frozenset[str] = frozenset()


def _worker_start(known: frozenset[str]) -> None:
    """Once per worker process: Ctrl-C is the parent's to handle, the worker dies with its parent (no orphan
    spins on after a kill -9), and the signature database is loaded once."""
    global _KNOWN  # noqa: PLW0603 - per-process state, set once by the pool's initializer
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    _KNOWN = known
    _warm()


def _die_with_parent() -> None:
    """Linux prctl(PR_SET_PDEATHSIG, SIGKILL); elsewhere nothing (the per-case time budget still ends a worker)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _bounded(case: Case, known: frozenset[str]) -> CaseResult:
    """`analyse_case` under a wall-clock budget (worker processes and the single-process path only)."""
    try:
        with time_limit(CASE_SECONDS):
            return analyse_case(case, known)
    except Overtime:
        return _failed(case, f"analysis ran past {CASE_SECONDS:.0f} s and was stopped (see CASE_SECONDS)")


def _warm() -> None:
    """Load what every case needs (pipeline modules, signature database) before the first case."""
    from ..pipeline import text_prefilter
    from ..signatures import load_default

    load_default()
    text_prefilter()


def _work(cases: list[Case]) -> list[CaseResult]:
    return [_bounded(case, _KNOWN) for case in cases]


def _local(todo: list[Case], known: frozenset[str], jobs: int) -> Generator[CaseResult | None, None, None]:
    """Results in completion order from `jobs` reused worker processes (in this process when jobs is 1), and a
    None tick whenever BATCH_SECONDS pass without one, so finished results never wait on a slow case."""
    if jobs == 1 or len(todo) <= 1:
        _warm()
        for case in todo:
            yield _bounded(case, known) if _main_thread() else analyse_case(case, known)
        return
    import multiprocessing

    _warm()  # loaded before the fork, inherited by every worker
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    chunk = max(1, min(16, len(todo) // (jobs * 16)))
    pool = context.Pool(jobs, initializer=_worker_start, initargs=(known,))
    try:
        chunks = [todo[i : i + chunk] for i in range(0, len(todo), chunk)]
        finished = pool.imap_unordered(_work, chunks)  # chunksize 1: only then has the iterator next(timeout)
        while True:
            try:
                yield from finished.next(BATCH_SECONDS)
            except multiprocessing.TimeoutError:
                yield None
            except StopIteration:
                break
        pool.close()
    finally:
        pool.terminate()
        pool.join()


def _dask(todo: list[Case], known: frozenset[str], scheduler: str | None,
          jobs: int) -> Generator[CaseResult, None, None]:
    """Results from a dask.distributed cluster: the one at `scheduler`, or a LocalCluster of `jobs` processes.

    Workers must see the case paths (a shared file system); results come back here and go to the same store.
    """
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as exc:
        raise ScanError("--engine dask needs dask.distributed: pip install 'gpu-postmortem[dask]'") from exc
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        batches = [todo[i:i + DASK_TASK_CASES] for i in range(0, len(todo), DASK_TASK_CASES)]
        shared = client.scatter(known, broadcast=True) if known else known
        futures = client.map(analyse_batch, batches, known=shared, pure=False)
        batch_of = {future.key: batch for future, batch in zip(futures, batches)}
        for future in as_completed(futures):
            try:
                results = future.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker costs its batch, recorded per case
                results = [_failed(case, f"dask task failed: {type(exc).__name__}: {exc}")
                           for case in batch_of[future.key]]
            yield from results
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _failed(case: Case, why: str) -> CaseResult:
    import hashlib

    digest = "unread-" + hashlib.sha256(f"{case.path}\0{case.stat_key}".encode("utf-8", "replace")).hexdigest()
    return CaseResult(case.path, case.stat_key, digest, "error", why)


# ---------------------------------------------------------------- progress


class Bar:
    """Cases done, rate and ETA on one stderr line, redrawn at most 5 times a second; silent off a terminal."""

    def __init__(self, total: int, stream: TextIO | None):
        self.total, self.done, self.width = total, 0, 0
        self.stream = stream if stream is not None and is_terminal(stream) else None
        self.started = self.shown = time.monotonic()

    def step(self) -> None:
        self.done += 1
        now = time.monotonic()
        if self.stream is not None and (now - self.shown >= 0.2 or self.done == self.total):
            self.shown = now
            rate = self.done / max(now - self.started, 1e-6)
            eta = (self.total - self.done) / rate if rate else 0
            line = (f"\rpostmortem scan: {self.done}/{self.total} cases ({100 * self.done // max(self.total, 1)} %), "
                    f"{rate:.0f} cases/s, ETA {eta:.0f} s ")
            self.width = max(self.width, len(line))
            self.stream.write(line)
            self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
