"""One fuzz target per parser: bytes in, the parser's contract checked.

A target raises only when the contract is broken: an exception the parser does
not declare (the callers catch ElfError, CfiError, PayloadError and nothing
else), a "failed" diagnostic (a source or reader that fell over and was caught
by the pipeline's safety net), or more than TARGET_SECONDS of work on one input.
Seeds are the real files under tests/data that each parser was built for.
"""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from postmortem import safe_pickle
from postmortem.binaries import cudadump, fatbin
from postmortem.core import elf, notes, unwind
from postmortem.core.arch import BY_MACHINE
from postmortem.core.modules import Image
from postmortem.deadline import Overtime, time_limit
from postmortem.inputs import open_inputs
from postmortem.model import Options
from postmortem.pipeline import read_blob, text_prefilter
from postmortem.reader import BytesReader
from postmortem.sources import card_of, core_file, text_sources
from postmortem.text import TextDoc

DATA = Path(__file__).parent.parent / "data"
REGRESSIONS = Path(__file__).parent / "regressions"
TARGET_SECONDS = 10.0
"""Most time one input may take in any target: far above any real input's, so only a hang or a blow-up trips it."""
DECLARED = (elf.ElfError, unwind.CfiError, fatbin.PayloadError)


class Hang(Exception):
    """The target ran past TARGET_SECONDS on one input."""


@contextmanager
def time_bound(seconds: float = TARGET_SECONDS) -> Iterator[None]:
    try:
        with time_limit(seconds):
            yield
    except Overtime:
        raise Hang(f"more than {seconds} s on one input") from None


def _no_failure(diagnostics) -> None:
    failed = [d for d in diagnostics if "failed" in d and ("parser" in d or "reader" in d)]
    assert not failed, failed


def _decompressed(path: Path) -> bytes:
    data = path.read_bytes()
    if data.startswith(b"\x28\xb5\x2f\xfd"):
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(data).read()
    return data


# ---------------------------------------------------------------- targets


def text_sources_target(data: bytes) -> None:
    """Every text source over one input, through the pipeline's own reader (read_blob)."""
    from postmortem.inputs import Blob

    info, _events = read_blob(Blob("<fuzz>", BytesReader(data)))
    _no_failure(info.diagnostics)


def one_source_target(name: str) -> Callable[[bytes], None]:
    source = next(s for s in text_sources() if s.NAME == name)
    kind = card_of(source).reads[0]  # the prefilter of an input kind the source reads

    def target(data: bytes) -> None:
        doc = TextDoc(BytesReader(data), "<fuzz>")
        lines = [line for line in doc.scan(text_prefilter(kind)) if source.NAME in line.groups]
        list(source.parse(doc, lines))

    return target


def issue_target(data: bytes) -> None:
    """A bug report (Markdown or GitHub's JSON) read, cut, triaged and answered."""
    from postmortem.render.triage_comment import render_markdown
    from postmortem.triage import triage
    from postmortem.triage.issue import IssueError, read_issue

    try:
        issue = read_issue(data, "<fuzz>")
    except IssueError:
        return
    assert render_markdown(triage(issue)).startswith("<!-- postmortem-triage -->")


def core_target(data: bytes) -> None:
    """A whole core through the reader (notes, memory, modules, unwinding, Python stacks)."""
    result = core_file.read(BytesReader(data), "<fuzz>.core", Options())
    _no_failure(result.diagnostics)


def elf_notes_target(data: bytes) -> None:
    """The note walker and every note decoder over one PT_NOTE's bytes."""
    try:
        found = list(elf.notes(data, 0))
    except elf.ElfError:
        return
    for note in found:
        notes.process_info(note.desc)
        for arch in BY_MACHINE.values():
            notes.thread_status(note.desc, arch)
        notes.signal_info(note.desc)
        notes.auxv(note.desc)
        notes.file_mappings(note.desc)


def cfi_target(data: bytes) -> None:
    """An ELF's .eh_frame (and its index) parsed and a row asked for at addresses across its text."""
    read = BytesReader(data).read_at
    try:
        image = Image(read, "<fuzz>")
        frame = unwind.EhFrame(read, image.sections)
    except DECLARED:
        return
    text = image.sections.get(".text")
    start = text.addr if text else 0
    for step in range(0, 4096, 61):
        try:
            row = frame.row(start + step)
        except DECLARED:
            continue
        if row is not None:
            try:
                for arch in BY_MACHINE.values():
                    unwind.apply_row(row, {arch.sp_reg: 0x7FFF0000, arch.pc_reg: start + step}, lambda addr: None, arch)
            except DECLARED:
                pass


def dwarf_expression_target(data: bytes) -> None:
    """A DWARF expression (CFA or register rule) evaluated over a small fake machine."""
    memory = {0x1000 + 8 * i: 0x1000 + 8 * ((i + 1) % 64) for i in range(64)}
    try:
        unwind.evaluate(data, dict.fromkeys(range(17), 0x1000), memory.get, 0x1000)
    except DECLARED:
        pass


def fatbin_target(data: bytes) -> None:
    """Fatbin discovery in an object or library, with kernel names (every entry decompressed)."""
    result = fatbin.inventory(BytesReader(data).read_at, len(data), "<fuzz>", kernels=True)
    _no_failure(result.diagnostics)


def nvcudmp_target(data: bytes) -> None:
    """A CUDA GPU core dump's tables (devices, SMs, warps, lanes, exceptions)."""
    read = BytesReader(data).read_at
    try:
        head = elf.header(read)
    except elf.ElfError:
        return
    if cudadump.is_gpu_dump(head):
        try:
            cudadump.read_dump(read, len(data))
        except DECLARED:
            pass


def safe_pickle_target(data: bytes) -> None:
    """The plain-data pickle decoder: any bytes give data or PickleRefused, nothing is run, in bounded time."""
    with time_bound():
        try:
            safe_pickle.loads(data)
        except safe_pickle.PickleRefused:
            pass


def archive_target(data: bytes) -> None:
    """Compressed streams and archives opened by content, every member read to its end."""
    with tempfile.NamedTemporaryFile(suffix=".bin") as handle:
        handle.write(data)
        handle.flush()
        for blob in open_inputs([handle.name]):
            if blob.reader is not None:
                blob.reader.read_at(max(0, blob.reader.size - 4096), 4096)


# ---------------------------------------------------------------- seeds


def _files(*globs: str) -> list[Path]:
    return sorted(p for pattern in globs for p in DATA.glob(pattern) if p.is_file() and p.suffix not in (".md", ".sh"))


def _archives() -> list[bytes]:
    """Real archives of real test files, built here: gzip, xz, bz2, zstd, tar, tar.gz and zip."""
    import bz2
    import gzip
    import io
    import lzma
    import tarfile
    import zipfile

    import zstandard

    logs = list(_files("kernel_log/*", "framework_log/*"))[:3]
    body = logs[0].read_bytes()
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as archive:
        for path in logs:
            archive.add(path, arcname=f"case/{path.name}")
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in logs:
            archive.write(path, f"case/{path.name}")
    return [gzip.compress(body), lzma.compress(body), bz2.compress(body), zstandard.compress(body),
            tar.getvalue(), gzip.compress(tar.getvalue()), packed.getvalue()]


def _note_segments() -> list[bytes]:
    """The PT_NOTE bytes of every committed x86-64 and aarch64 core."""
    found = []
    for path in _files("core/*.core.zst"):
        data = _decompressed(path)
        read = BytesReader(data).read_at
        head = elf.header(read)
        found += [data[s.offset : s.offset + s.filesz] for s in elf.segments(read, head) if s.type == elf.PT_NOTE]
    return found


def _expressions() -> list[bytes]:
    """Real CFA expressions (the PLT's, glibc's signal frame) and small programs of every opcode family."""
    plt = bytes([0x77, 8, 0x80, 0, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22])  # DW_CFA_def_cfa_expression of .plt
    return [plt, bytes([0x08, 0x05, 0x12, 0x1E]), bytes([0x71, 0x10, 0x06]), bytes([0x0C]) + struct.pack("<I", 7),
            bytes([0x2F, 0xFD, 0xFF]), bytes([0x70, 0x08, 0x28, 0x02, 0x00, 0x31])]


@dataclass(frozen=True)
class Target:
    """A fuzz target, its seeds, and its name (the folder of its regression inputs)."""

    name: str
    run: Callable[[bytes], None]
    seeds: Callable[[], list[bytes]]


def _read_all(paths: list[Path]) -> list[bytes]:
    return [_decompressed(p) for p in paths]


TEXT_SEEDS = ("*/*.txt", "*/*.log", "*/*.xml", "*/*.csv", "*/*/*.json", "flight_recorder/*/nccl_trace_rank_*")
"""Logs, reports, tables, the JSON of snapshots and flight-recorder dumps, and the dumps' pickles."""

TARGETS: tuple[Target, ...] = (
    Target("text", text_sources_target, lambda: _read_all(_files(*TEXT_SEEDS))),
    *(Target(f"source-{s.NAME}", one_source_target(s.NAME), lambda: _read_all(_files(*TEXT_SEEDS)))
      for s in text_sources()),
    Target("safe-pickle", safe_pickle_target, lambda: _read_all(_files("flight_recorder/*/nccl_trace_rank_*"))),
    Target("core", core_target, lambda: _read_all(_files("core/*.core.zst"))),
    Target("elf-notes", elf_notes_target, _note_segments),
    Target("cfi", cfi_target, lambda: _read_all(_files("core/*.so*", "core/crash", "fatbin/*.so"))),
    Target("dwarf-expression", dwarf_expression_target, _expressions),
    Target("fatbin", fatbin_target, lambda: _read_all(_files("fatbin/*.o", "fatbin/*.so", "fatbin/*.cubin"))),
    Target("nvcudmp", nvcudmp_target, lambda: _read_all(_files("nvcudmp/*.nvcudmp"))),
    Target("archive", archive_target, _archives),
    Target("issue", issue_target, lambda: _read_all(sorted((DATA.parent / "triage").glob("*/issue.json")))),
)
