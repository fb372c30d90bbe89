"""Input formats: one module per format, each turning candidate lines into Events.

A text source module defines:

- `NAME`: the format's name, shown as the input's format;
- `ANCHORS`: byte literals; a line is handed to the source only if it holds one
  (the prefilter finds them all in one pass over the raw bytes);
- `parse(doc, lines)`: yields `Event`s from those candidate lines (made with
  `doc.event(...)`), reading further lines through `doc.following(line)` for
  multi-line blocks such as tracebacks.

A source of last resort (`mentions`: known codes and phrases in any layout) sets READS_UNCLAIMED and its
`parse(doc, lines, earlier, unread)` is also given the events the sources before it made of this input and a
list for the lines it saw but did not read; they run last (`error_words`, an error line read by its words alone,
after `mentions`).

Adding a format is adding a module and naming it in TEXT_SOURCE_MODULES.
Binary inputs have their own entry points: `core_file` reads ELF cores.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

TEXT_SOURCE_MODULES = (
    "kernel_log", "framework_log", "nccl_log", "gpu_tools", "sanitizer", "gdb_log", "coredump_log", "bug_report",
    "gpu_telemetry", "nvsmi_xml", "job_log", "host_messages", "health_tests", "collect_bundle",
    "run_record", "process_snapshot", "flight_recorder", "live_stacks", "torch_env", "installed", "graphics_log",
    "reporter_words",
    "mentions",
    "error_words",
)
"""Text formats, in the order their events are listed."""


@cache
def text_sources() -> tuple[ModuleType, ...]:
    """The text source modules, imported on first use (a core alone never pays for them)."""
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in TEXT_SOURCE_MODULES)
