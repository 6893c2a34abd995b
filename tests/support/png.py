"""Read an 8-bit RGB/RGBA PNG into rows of pixels (stdlib only): enough to check what a screenshot shows."""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from pathlib import Path


def read_png(path: Path) -> tuple[int, int, list[list[tuple[int, int, int]]]]:
    """(width, height, rows of (r, g, b)); raises ValueError for PNGs this reader does not handle."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    offset, idat, header = 8, b"", b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        offset += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    channels = 3 if colour == 2 else 4
    stride = width * channels
    raw = zlib.decompress(idat)
    rows: list[list[tuple[int, int, int]]] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append([(line[x], line[x + 1], line[x + 2]) for x in range(0, stride, channels)])
        previous = line
    return width, height, rows


def colour_count(rows: list[list[tuple[int, int, int]]], colour: str, tolerance: int = 10) -> int:
    """How many pixels of ``rows`` are ``colour`` (``#rrggbb``), each channel within ``tolerance``.

    Counted over the screenshot's distinct pixel values (a few thousand, each with how many pixels have it),
    not pixel by pixel: a test asks a 2-million-pixel screenshot about several colours.
    """
    want = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return sum(
        count
        for px, count in _histogram(rows).items()
        if all(abs(a - b) <= tolerance for a, b in zip(px, want, strict=True))
    )


#: The last screenshot's rows and their histogram (a test checks one screenshot for several colours in a row).
_last: list[tuple[list[list[tuple[int, int, int]]], Counter[tuple[int, int, int]]]] = []


def _histogram(rows: list[list[tuple[int, int, int]]]) -> Counter[tuple[int, int, int]]:
    if not _last or _last[0][0] is not rows:
        _last[:] = [(rows, Counter(px for row in rows for px in row))]
    return _last[0][1]
