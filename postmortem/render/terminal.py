"""The one gate between any text and a terminal: what a command writes to stdout or stderr for a person.

Function and file names, log lines, archive member names, table names of a foreign store: any of them may hold
an escape sequence (a title change, an OSC 8 link, a screen clear), a C1 control (U+009B is a whole CSI on its
own), a bidi override or a raw byte of a name that is not UTF-8. Every terminal writer passes its text through
`terminal_text` (or writes with `echo`), so none of them reaches the terminal raw, whichever field forgot it.
"""

from __future__ import annotations

import sys
import textwrap
import unicodedata
from typing import TextIO

import click

from .. import later
from ..names import escaped_bytes, safe

OWN_STYLES = later.compile(r"(\x1b\[(?:0|1|22|3[0-79]|9[0-7])m)")
"""The SGR codes `click.style` writes for the tool's own colours and bold (and their resets): they change
colour only, never hide text (SGR 8), move the cursor or open a link; kept when the text is `styled`."""


def terminal_text(text: str, styled: bool = False) -> str:
    """`text` made inert for a terminal: controls, bidi marks and raw bytes shown escaped (`\\x1b`, `\\u202e`,
    `\\x9b`), newlines and tabs kept; with `styled`, the tool's own colour codes (OWN_STYLES) kept too."""
    if not styled:
        return _inert(text)
    return "".join(part if i % 2 else _inert(part) for i, part in enumerate(OWN_STYLES.split(text)))


def _inert(text: str) -> str:
    return escaped_bytes(safe(text))  # a name's raw bytes (0x9B: a CSI on an 8-bit terminal) escaped too


def echo(message: str = "", err: bool = False, nl: bool = True, color: bool = False) -> None:
    """click.echo through `terminal_text`: what every terminal writer of the tool calls."""
    click.echo(terminal_text(message, styled=color), err=err, nl=nl, color=color)


def reply(text: str, data: bool = False, nl: bool = True, color: bool = False) -> None:
    """A command's answer on stdout through the gate; but a data format (JSON, Markdown, HTML) going on to a pipe
    or a file as it is: its reader parses it, its own escaping holds there (JSON escapes every C0 control), and
    the gate's `\\x9b` would be no JSON."""
    if data and not is_terminal(sys.stdout):
        click.echo(text, nl=nl)
    else:
        echo(text, nl=nl, color=color)


TEXT_WIDTH = 88
"""Columns of wrapped prose when the output is no terminal (a file, a pipe) and COLUMNS is not set."""
WIDEST = 100
"""Prose never runs wider than this on a wide terminal: long lines are slow to read."""
NARROWEST = 40


def text_width(stream: TextIO) -> int:
    """Columns to wrap prose at: COLUMNS where set (as `ls` and git honour it), else the terminal's width, else
    TEXT_WIDTH; kept between NARROWEST and WIDEST."""
    import os
    import shutil

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        width = int(columns)
    elif is_terminal(stream):
        width = shutil.get_terminal_size((TEXT_WIDTH, 24)).columns
    else:
        return TEXT_WIDTH
    return max(NARROWEST, min(width, WIDEST))


def wants_color(stream: TextIO, refused: bool = False) -> bool:
    """Colour by the conventions a terminal user sets: NO_COLOR (any value) or --no-color refuse it, FORCE_COLOR
    (any value but 0) asks for it even into a pipe, TERM=dumb refuses it; else a terminal gets it."""
    import os

    if refused or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "0") not in ("", "0"):
        return True
    return os.environ.get("TERM") != "dumb" and is_terminal(stream)


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is a terminal; a stream without isatty or already closed is not."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


_TOKENS = later.compile(r"[!-~]+|\s+|.")
"""Wrapping units: a run of printable ASCII (a word, a path, a flag) stays whole; any other character stands alone."""


NO_LINE_START = frozenset("，。、；：！？）」』”’》〉】,.;:!?)")
"""Punctuation a line never starts with (Chinese typesetting's rule): it stays at the end of the line before, one
column past the width if need be, so no line of a wrapped paragraph begins with "；"."""


NO_LINE_END = frozenset("（「『“‘《〈【")
"""Punctuation a line never ends with: an opening bracket moves down with the words it opens."""


def wrap(text: str, width: int = 86) -> list[str]:
    """Wrap at `width` columns; CJK text has no spaces, so it may break between any two wide characters. A word, a
    path or an identifier is never broken (`torch.cuda.OutOfMemoryError` stays whole on a narrow terminal)."""
    if text.isascii():
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
    lines, line, used = [], "", 0
    for token in _TOKENS.findall(text):
        size = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in token)
        if used + size > width and line and token not in NO_LINE_START:
            kept = line.rstrip()
            carried = kept[-1] if kept[-1] in NO_LINE_END else ""  # an opening bracket goes with what it opens
            lines.append(kept[: len(kept) - len(carried)].rstrip())
            line, used = carried, len(carried) * 2
        if line or not token.isspace():
            line, used = line + token, used + size
    return lines + [line] if line else lines
