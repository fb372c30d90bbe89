"""Undo how a log line was wrapped on its way to us, so that no parser has to know.

Text reaches postmortem quoted in an issue (`> `, or with the Markdown fence glued to its first
line), pasted with an editor's line-number gutter (`  12 | `), or relayed by something that
prefixes every line: docker compose (`trainer-1  | `), torchrun and Slurm (`[rank3]: `, `[default0]:`, `0: `), mpirun
(`[1,0]<stderr>:`), Julia (`From worker 2:`), Ray and vLLM (`(VllmWorker TP1 pid=409) `,
`(raylet) `), kubectl and CI runners (`2024-05-01T10:00:00.123456789Z `: a relay's UTC stamp with
6 to 9 fractional digits; a log's own ISO stamps, as journald writes them, stay).

`strip_transport` takes those layers off the front of a line, outermost first, and leaves
everything else alone: the line's own timestamps (sources read them; the framework source reads
a relay's stamp from the original line), and its indentation (nvidia-smi -q and tracebacks are
indented on purpose).

Sources read the normalised text (`Line.text`); evidence shows the line as written
(`Line.original`), and sources that want what a prefix says (a rank, a worker) read it there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from . import later

if TYPE_CHECKING:
    import regex

TRANSPORT = later.compile(
    r"""
    \G(?:                                                   # only where the last layer ended (linear under search)
      [ \t]*+(?:>[ \t]?)+                          # quote markers, also nested (">> ")
    | [ \t]*(?:```|~~~)(?=\S)                                # a Markdown fence glued to the first line
    | [ \t]*\d{1,6}[ \t]*[|│][ \t]?                          # editor / pager gutter: "  12 | "
    | [ \t]*(?:\[(?:rank|default)(?P<rank>\d+)\]                 # torchrun: "[rank3]:", "[default3]:"
      |\[\d+,(?P<rank>\d+)\]<(?:stdout|stderr)>):[ \t]?              # mpirun --tag-output: "[1,3]<stderr>:"
    | [ \t]*From[ ]worker[ ]\d+:[ \t]*                      # Julia Distributed
    | [ \t]*\((?:[A-Za-z][\w.\-]*(?:[ ][\w.\-]+)*[ ])?pid=\d+(?:,[ ]ip=[\d.]+)?\)[ \t]+  # Ray / vLLM workers
    | [ \t]*\((?:raylet|gcs_server|dashboard\w*)\)[ \t]+    # Ray daemons
    | [ \t]*[A-Za-z][\w.\-]*[ \t]+\|[ \t]                    # docker compose: "vllm-1  | "
    | [ \t]*(?P<rank>\d{1,4}):[ ]                            # srun --label: "0: "
    | \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6,9}Z[ ]           # kubectl --timestamps, CI runners (UTC, 6-9 digits)
    )""",
    later.VERBOSE,
)
MAX_LAYERS = 4
"""Most prefixes taken off one line ("> 12 | [rank0]: ..." is three)."""


def strip_transport(text: str) -> str:
    """The line without the quoting, gutter and relay prefixes in front of it."""
    pos = 0
    for match in _layers(text):
        pos = match.end()
    return text[pos:] if pos else text


def relay_rank(text: str) -> int | None:
    """The rank the relay prefixes of a line as written give it (torchrun `[rank3]:` / `[default3]:`, mpirun
    `[1,3]<stderr>:`, srun `3: `), the outermost first; None when none does."""
    return next((int(match["rank"]) for match in _layers(text) if match["rank"]), None)


def _layers(text: str) -> Iterator[regex.Match[str]]:
    pos = 0
    for _ in range(MAX_LAYERS):
        match = TRANSPORT.match(text, pos)
        if match is None or match.end() == pos:
            return
        yield match
        pos = match.end()
