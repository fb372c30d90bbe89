"""Names from the file system as text that can be stored and shown: their undecodable bytes as a stable escape.

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
