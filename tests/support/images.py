"""Small valid image files for tests (built by hand: no image library needed)."""

from __future__ import annotations

import base64
import struct
import zlib


def png_bytes(width: int = 2, height: int = 2) -> bytes:
    """A real PNG (greyscale, all black) that browsers decode."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = b"".join(b"\x00" + b"\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature and IHDR, no pixels: a header may claim any size in a few bytes."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))


def jpeg_header(width: int, height: int) -> bytes:
    """A JPEG's start and frame header: enough for its type and size."""
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + sof + b"\xff\xd9"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
