"""Text from inputs made fit to store and show: a file name's undecodable bytes as a stable escape, and the
controls of any input text made visible.

Python keeps a name's bytes that are not UTF-8 as lone surrogates (U+DC80-U+DCFF, "surrogateescape"): they cannot
be written as UTF-8 (SQLite refuses them) and, written back as bytes, 0x9B is a CSI on an 8-bit terminal.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def escaped_bytes(text: str) -> str:
    """`text` with each undecodable byte written `\\xff` (any other lone surrogate `\\udXXX`): the same name always
    gives the same text, so a rescan finds a stored location again, and the bytes can be read back from it."""
    return _SURROGATE.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 controls (ESC starts CSI, OSC 8 links and title changes) and the bidirectional marks and overrides
(U+202E turns `gnp.exe` into what looks like `exe.png`): nothing from an input may reorder or drive the display. A
character class, which the standard `re` runs as fast: every report renders through it, and it need not load `regex`."""


def safe(text: str) -> str:
    """Controls made visible (ESC shows as '\\x1b', U+202E as '\\u202e'): no input may drive a terminal or a viewer."""
    return _CONTROL.sub(_visible, text)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
