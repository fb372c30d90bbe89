"""A native frame's line and its source part, shared by the text and Markdown reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..names import safe
from .i18n import Translator

if TYPE_CHECKING:
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


def frame_line(frame: Frame, t: Translator) -> str:
    """`pc module!symbol+offset (file:line)` as gdb's `bt` reads, input text made safe; a frame found
    without CFI is marked as the guess it is."""
    from ..core.unwind import GUESSES  # here: a report without native frames never loads the unwinder
    where = f"{safe(frame.module or '?')}!{safe(frame.symbol or '??')}"
    if frame.symbol_offset:
        where += f"+{frame.symbol_offset:#x}"
    return f"{frame.pc} {where}{safe(source(frame))}" + (f"  [{t('frame_guess', how=frame.how)}]"
                                                     if frame.how in GUESSES else "")
