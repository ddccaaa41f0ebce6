"""An image as a share link publishes it: its pixels, without the metadata its file carries.

A photo's file says more than its picture: EXIF holds where it was taken (GPS), when, the camera's and
often its owner's name; XMP and IPTC blocks the author, place and editing history; comments and text
chunks whatever a program wrote; and data after the image's end (a phone's "motion photo" video, a
second picture of a multi-picture JPEG). The owner sees none of it in the chat, so a read-only link
(share_views.share_image) serves the image without it: what is drawn, and what drawing it needs (the
colour profile, an animation's loop count), is kept; the EXIF orientation too, as a minimal EXIF block
of that one tag, or a photo taken upright would be shown on its side.

Read by structure, as optimizer.images reads the type and size: no decoder. A file cut short or
malformed ends where its structure stops being readable (fail closed): what follows is never published.
The owner's own page, exports and branches keep the file as it was sent.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

_ORIENTATION_TAG = 0x0112
_EXIF_HEADER = b"Exif\x00\x00"


def image_metadata_strip(data: bytes, mime: str) -> bytes:
    """`data` (an image of type `mime`, as optimizer.images read it) without its metadata."""
    strip = _STRIPPERS.get(mime)
    return data if strip is None else strip(data)


# --- EXIF: only the orientation survives ----------------------------------------------------------------


def _exif_orientation(tiff: bytes) -> int | None:
    """The orientation (2-8) an EXIF block's first directory states; None for 1 (upright), none or unreadable."""
    if tiff.startswith(_EXIF_HEADER):
        tiff = tiff[len(_EXIF_HEADER):]
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None or len(tiff) < 8:
        return None
    (offset,) = struct.unpack(order + "I", tiff[4:8])
    if offset + 2 > len(tiff):
        return None
    (count,) = struct.unpack(order + "H", tiff[offset:offset + 2])
    for at in range(offset + 2, min(offset + 2 + 12 * count, len(tiff) - 11), 12):
        tag, kind, _n = struct.unpack(order + "HHI", tiff[at:at + 8])
        if tag == _ORIENTATION_TAG and kind == 3:  # SHORT, its value in the entry itself
            (value,) = struct.unpack(order + "H", tiff[at + 8:at + 10])
            return value if 2 <= value <= 8 else None
    return None


def _orientation_tiff(orientation: int) -> bytes:
    """A TIFF (EXIF) block of one directory holding one entry: the orientation."""
    entry = struct.pack(">HHIHH", _ORIENTATION_TAG, 3, 1, orientation, 0)
    return b"MM\x00\x2a" + struct.pack(">I", 8) + struct.pack(">H", 1) + entry + struct.pack(">I", 0)


# --- JPEG ------------------------------------------------------------------------------------------------

_SOS, _EOI, _APP1 = 0xDA, 0xD9, 0xE1
# Segments without a length: restart markers and TEM.
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})


def _jpeg_kept(marker: int, body: bytes) -> bool:
    """Whether a segment is needed to draw the picture. APP0 JFIF, the ICC colour profile (APP2) and
    Adobe's colour transform (APP14) are; every other application segment (EXIF and XMP in APP1, the
    multi-picture index in APP2, Photoshop's IPTC in APP13, vendors' own) and comments are not."""
    if marker == 0xE0:
        return body.startswith(b"JFIF\x00")
    if marker == 0xE2:
        return body.startswith(b"ICC_PROFILE\x00")
    if marker == 0xEE:
        return body.startswith(b"Adobe")
    return not (0xE0 <= marker <= 0xEF or marker == 0xFE)


def _jpeg_scan_end(data: bytes, at: int) -> int:
    """Where the entropy-coded data starting at `at` ends: at the next marker (0xFF followed by neither
    a stuffed 0x00 nor a restart marker), or the end of the data."""
    while (found := data.find(b"\xff", at)) != -1 and found + 1 < len(data):
        follower = data[found + 1]
        if follower != 0x00 and not 0xD0 <= follower <= 0xD7:
            return found
        at = found + 2
    return len(data)


def _jpeg(data: bytes) -> bytes:
    out = bytearray(b"\xff\xd8")
    at, end, oriented = 2, len(data), False
    while at < end and data[at] == 0xFF:
        while at < end and data[at] == 0xFF:  # fill bytes before a marker
            at += 1
        if at >= end:
            break
        marker = data[at]
        at += 1
        if marker == _EOI:  # the picture's end: anything after it (a video, another picture) is not kept
            out += b"\xff\xd9"
            break
        if marker in _STANDALONE:
            out += bytes((0xFF, marker))
            continue
        if at + 2 > end:
            break
        (length,) = struct.unpack(">H", data[at:at + 2])
        if length < 2 or at + length > end:
            break
        body = data[at + 2:at + length]
        if _jpeg_kept(marker, body):
            out += bytes((0xFF, marker)) + data[at:at + length]
        elif marker == _APP1 and not oriented and body.startswith(_EXIF_HEADER):
            oriented = True
            orientation = _exif_orientation(body)
            if orientation is not None:
                exif = _EXIF_HEADER + _orientation_tiff(orientation)
                out += bytes((0xFF, _APP1)) + struct.pack(">H", len(exif) + 2) + exif
        at += length
        if marker == _SOS:
            scan_end = _jpeg_scan_end(data, at)
            out += data[at:scan_end]
            at = scan_end
    return bytes(out)


# --- PNG -------------------------------------------------------------------------------------------------

# The ancillary chunks that say how to draw the picture (transparency, colour, pixel size, an animation's
# frames): kept with the critical ones. Text (tEXt, zTXt, iTXt: XMP travels in one), the time, a
# program's own chunks (a content credential's) are not; EXIF is, as its orientation alone.
_PNG_DRAWN = frozenset({b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"cICP", b"mDCV", b"mDCv", b"cLLI", b"cLLi",
                        b"sBIT", b"bKGD", b"pHYs", b"acTL", b"fcTL", b"fdAT"})


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png(data: bytes) -> bytes:
    out = bytearray(data[:8])
    at, end = 8, len(data)
    while at + 12 <= end:
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind = data[at + 4:at + 8]
        stop = at + 12 + length
        if stop > end:
            break
        if kind == b"eXIf":
            orientation = _exif_orientation(data[at + 8:at + 8 + length])
            if orientation is not None:
                out += _png_chunk(b"eXIf", _orientation_tiff(orientation))
        elif kind[:1].isupper() or kind in _PNG_DRAWN:  # critical (IHDR, PLTE, IDAT, IEND), or drawn
            out += data[at:stop]
        at = stop
        if kind == b"IEND":  # nothing after the image's end
            break
    return bytes(out)


# --- WebP ------------------------------------------------------------------------------------------------

# VP8X's flags: an EXIF chunk and an XMP chunk are present.
_WEBP_EXIF_FLAG, _WEBP_XMP_FLAG = 0x08, 0x04
# The chunks that draw the picture: its header, its (lossy, lossless) bitstream, alpha, colour profile and
# animation. EXIF is kept as its orientation alone; XMP and any other chunk are not.
_WEBP_DRAWN = frozenset({b"VP8X", b"VP8 ", b"VP8L", b"ALPH", b"ICCP", b"ANIM", b"ANMF"})


def _riff_chunk(fourcc: bytes, body: bytes) -> bytes:
    return fourcc + struct.pack("<I", len(body)) + body + (b"\x00" if len(body) % 2 else b"")


def _webp(data: bytes) -> bytes:
    chunks: list[tuple[bytes, bytes]] = []
    # Within the RIFF's stated size: bytes after it are not the picture's.
    at, end = 12, min(len(data), 8 + int.from_bytes(data[4:8], "little"))
    while at + 8 <= end:
        fourcc = data[at:at + 4]
        (size,) = struct.unpack("<I", data[at + 4:at + 8])
        if at + 8 + size > end:
            break
        body = data[at + 8:at + 8 + size]
        if fourcc == b"EXIF":
            orientation = _exif_orientation(body)
            if orientation is not None:
                chunks.append((fourcc, _orientation_tiff(orientation)))
        elif fourcc in _WEBP_DRAWN:
            chunks.append((fourcc, body))
        at += 8 + size + size % 2
    has_exif = any(fourcc == b"EXIF" for fourcc, _ in chunks)
    if chunks and chunks[0][0] == b"VP8X" and chunks[0][1]:
        header = chunks[0][1]
        flags = header[0] & ~(_WEBP_EXIF_FLAG | _WEBP_XMP_FLAG) | (_WEBP_EXIF_FLAG if has_exif else 0)
        chunks[0] = (b"VP8X", bytes((flags,)) + header[1:])
    body = b"WEBP" + b"".join(_riff_chunk(fourcc, chunk) for fourcc, chunk in chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


# --- GIF -------------------------------------------------------------------------------------------------

# Application extensions that say how an animation plays (its loop count); any other (XMP's "XMP DataXMP",
# a program's own) is metadata, as a comment extension is.
_GIF_PLAYBACK = frozenset({b"NETSCAPE2.0", b"ANIMEXTS1.0"})


def _gif_blocks_end(data: bytes, at: int) -> int | None:
    """The end of the data sub-blocks starting at `at` (after their 0 terminator), or None if cut short."""
    while at < len(data):
        size = data[at]
        at += 1 + size
        if size == 0:
            return at if at <= len(data) else None
    return None


def _gif_color_table(packed: int) -> int:
    return 3 * 2 ** ((packed & 0x07) + 1) if packed & 0x80 else 0


def _gif(data: bytes) -> bytes:
    if len(data) < 13:
        return data[:6]
    at = 13 + _gif_color_table(data[10])
    out = bytearray(data[:at])
    while at < len(data):
        introducer = data[at]
        if introducer == 0x3B:  # the trailer: nothing after it is kept
            out += b";"
            break
        if introducer == 0x2C:  # an image: descriptor, local colour table, LZW code size, data
            if at + 10 > len(data):
                break
            start = at + 10 + _gif_color_table(data[at + 9]) + 1
            stop = _gif_blocks_end(data, start) if start <= len(data) else None
            if stop is None:
                break
            out += data[at:stop]
        elif introducer == 0x21 and at + 2 <= len(data):  # an extension: its label, then sub-blocks
            label = data[at + 1]
            stop = _gif_blocks_end(data, at + 2)
            if stop is None:
                break
            application = data[at + 3:at + 14] if label == 0xFF else b""
            if label != 0xFE and (label != 0xFF or application in _GIF_PLAYBACK):
                out += data[at:stop]
        else:
            break
        at = stop
    return bytes(out)


_STRIPPERS: dict[str, Callable[[bytes], bytes]] = {
    "image/jpeg": _jpeg,
    "image/png": _png,
    "image/webp": _webp,
    "image/gif": _gif,
}
