"""Images as the optimizer prices them: the type and size read from the file's first bytes, and
OpenAI's documented token cost of an image of that size.

No decoder (Pillow) is needed: the four types chat models take (PNG, JPEG, WebP, GIF) state their
size in their header, so validating an upload and pricing it costs a few hundred bytes of reading, and
the core stays pure Python. What no header here describes is not an image to this module (None).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

LOW_DETAIL_TOKENS = 85  # OpenAI: a "low" detail image, whatever its size; also the base of the others
TILE_TOKENS = 170  # OpenAI: each 512-px tile of a "high" (or "auto") detail image
_FIT = 2048  # first scaled down to fit a 2048 x 2048 square,
_SHORT = 768  # then down so that its shortest side is 768
_TILE = 512

# JPEG start-of-frame markers (baseline, progressive, lossless…): they carry the size. C4, C8 and CC
# are other segments with the same high bits.
_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


@dataclass(frozen=True, slots=True)
class ImageInfo:
    mime: str
    width: int
    height: int


def image_info(data: bytes) -> ImageInfo | None:
    """The type and size `data` says it has by its magic bytes and header; None for anything else
    (another type, a cut header, a zero side). A client's own word on the type is never asked."""
    try:
        found = _sniff(data)
    except (struct.error, IndexError):
        return None
    if found is None or found[1] <= 0 or found[2] <= 0:
        return None
    return ImageInfo(*found)


def _sniff(data: bytes) -> tuple[str, int, int] | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return "image/png", width, height
    if data[:6] in (b"GIF87a", b"GIF89a"):
        width, height = struct.unpack("<HH", data[6:10])
        return "image/gif", width, height
    if data.startswith(b"\xff\xd8"):
        return _jpeg(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp(data)
    return None


def _jpeg(data: bytes) -> tuple[str, int, int] | None:
    """Walk the segments to the first start-of-frame (an EXIF or ICC block may come first)."""
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            at += 2
            continue
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if marker in _JPEG_SOF:
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return "image/jpeg", width, height
        if marker == 0xD9 or length < 2:
            return None
        at += 2 + length
    return None


def _webp(data: bytes) -> tuple[str, int, int] | None:
    kind = data[12:16]
    if kind == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return "image/webp", width & 0x3FFF, height & 0x3FFF
    if kind == b"VP8L" and data[20] == 0x2F:
        (bits,) = struct.unpack("<I", data[21:25])
        return "image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if kind == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return "image/webp", width, height
    return None


def image_tokens(width: int, height: int, *, detail: str = "auto") -> int:
    """OpenAI's documented cost of one image: 85 at "low" detail; at "high" and "auto" (which OpenAI
    prices as high for any image above the low size), 85 + 170 per 512-px tile once the image is
    scaled down to fit 2048 x 2048 and then down to a shortest side of 768. Never scaled up."""
    if detail == "low":
        return LOW_DETAIL_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > _FIT:
        scale = _FIT / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > _SHORT:
        scale = _SHORT / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(round(w, 6) / _TILE) * math.ceil(round(h, 6) / _TILE)
    return LOW_DETAIL_TOKENS + TILE_TOKENS * tiles
