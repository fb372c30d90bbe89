"""The source part of a native frame's line, shared by the text and Markdown reports."""

from __future__ import annotations

from ..core.report import Frame

INLINE_MARK = " > "
"""Between a frame and each function inlined into it, outermost to innermost (gdb's INLINE frames)."""


def source(frame: Frame) -> str:
    """` (file:line)` of the frame, then each inlined function with its own line; "" without DWARF lines."""
    text = _at(frame.file, frame.line)
    for inlined in reversed(frame.inlined):
        text += f"{INLINE_MARK}{inlined.function or '??'}{_at(inlined.file, inlined.line)}"
    return text


def _at(file: str | None, line: int | None) -> str:
    return f" ({file}:{line})" if file and line else ""
