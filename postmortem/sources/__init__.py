"""Input formats: one module per format, each turning candidate lines into Events.

A text source module defines:

- `NAME`: the format's name, shown as the input's format;
- `ANCHORS`: byte literals; a line is handed to the source only if it holds one
  (the prefilter finds them all in one pass over the raw bytes);
- `parse(doc, lines)`: yields `Event`s from those candidate lines (made with
  `doc.event(...)`), reading further lines through `doc.following(line)` for
  multi-line blocks such as tracebacks.

Adding a format is adding a module and naming it in TEXT_SOURCES.
"""

from __future__ import annotations

from types import ModuleType

from . import coredump_log, framework_log, gdb_log, gpu_tools, kernel_log, nccl_log, sanitizer

TEXT_SOURCES: tuple[ModuleType, ...] = (kernel_log, framework_log, nccl_log, gpu_tools, sanitizer, gdb_log, coredump_log)
