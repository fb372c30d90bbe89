"""LZ4 block decompression (the format CUDA 12 fatbins and nvcc --compress-mode=speed use).

The `lz4` package is used when it is installed; otherwise this small decoder of
the published block format (sequences of token, literals, 2-byte offset, match)
does it: fatbin payloads are kilobytes to a few megabytes, so pure Python is enough.
"""

from __future__ import annotations


class LZ4Error(ValueError):
    """The payload is not a valid LZ4 block (or does not give the expected size)."""


def decompress(data: bytes, size: int) -> bytes:
    """The `size` bytes an LZ4 block decompresses to."""
    try:
        import lz4.block  # optional: faster where installed
    except ImportError:
        return _decompress(data, size)
    try:
        return lz4.block.decompress(data, uncompressed_size=size)
    except Exception as exc:  # lz4 raises its own LZ4BlockError
        raise LZ4Error(str(exc)) from exc


def _length(data: bytes, at: int, base: int) -> tuple[int, int]:
    """A 4-bit length with its 255-run extension bytes; returns (length, next position)."""
    if base != 15:
        return base, at
    while True:
        if at >= len(data):
            raise LZ4Error("length runs past the end of the block")
        byte = data[at]
        at += 1
        base += byte
        if byte != 255:
            return base, at


def _decompress(data: bytes, size: int) -> bytes:
    out = bytearray()
    at = 0
    while at < len(data):
        token = data[at]
        literals, at = _length(data, at + 1, token >> 4)
        if at + literals > len(data):
            raise LZ4Error("literals run past the end of the block")
        if len(out) + literals > size:
            raise LZ4Error(f"output exceeds the expected {size} bytes")
        out += data[at:at + literals]
        at += literals
        if at >= len(data):
            break
        if at + 2 > len(data):
            raise LZ4Error("match offset cut off")
        offset = data[at] | data[at + 1] << 8
        match, at = _length(data, at + 2, token & 15)
        match += 4
        if offset == 0 or offset > len(out):
            raise LZ4Error(f"match offset {offset} points before the start of the output")
        if len(out) + match > size:  # checked before copying: extension bytes can make one match gigabytes long
            raise LZ4Error(f"output exceeds the expected {size} bytes")
        start = len(out) - offset
        if offset >= match:
            out += out[start:start + match]
        else:  # overlapping copy repeats the last `offset` bytes
            out += (out[start:] * (match // offset + 1))[:match]
    if len(out) != size:
        raise LZ4Error(f"decompressed to {len(out)} bytes, expected {size}")
    return bytes(out)
