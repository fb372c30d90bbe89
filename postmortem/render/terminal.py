"""The one gate between any text and a terminal: what a command writes to stdout or stderr for a person.

Function and file names, log lines, archive member names, table names of a foreign store: any of them may hold
an escape sequence (a title change, an OSC 8 link, a screen clear), a C1 control (U+009B is a whole CSI on its
own), a bidi override or a raw byte of a name that is not UTF-8. Every terminal writer passes its text through
`terminal_text` (or writes with `echo`), so none of them reaches the terminal raw, whichever field forgot it.
"""

from __future__ import annotations

import sys
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


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is a terminal; a stream without isatty or already closed is not."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
