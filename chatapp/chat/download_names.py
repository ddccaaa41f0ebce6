"""Downloads of a user's data (a chat's export, every chat, a chat's dashboard records): their file
names, after what they hold (a folder of downloads is read by name, not by id), and the streamed
response they all go out in, so each carries the same headers."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import AsyncIterator

from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

# What no file name holds on Windows, macOS or Linux: the separators, the reserved characters, controls
# (C1 as well as C0: a title pasted from a terminal can hold them).
_UNSAFE_IN_NAMES = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f-\x9f]+')
# Joins an emoji sequence (a family, a flag of a profession): kept, unlike the other format characters.
_ZWJ = "\u200d"
# A folder listing shows a name whole; the bytes leave room for the suffix and extension within the
# 255 bytes a file name may take on Linux and macOS (100 emoji are 400).
_MAX_CHARS = 100
_MAX_BYTES = 200
# Windows refuses these as a name, whatever the extension after them.
_WINDOWS_RESERVED = re.compile(r"(CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])", re.IGNORECASE)


def download_filename(title: str, *, fallback: str, extension: str, suffix: str = "") -> str:
    """A download named after a chat's title ("Trip to Lisbon.md"), as Open WebUI and LibreChat name
    theirs, `suffix` after it ("Trip to Lisbon records.csv"). What a file name cannot hold becomes a
    space; invisible format characters go (a right-to-left override would show "gpj.exe" as "exe.jpg").
    A title with no letter, digit or symbol (emoji are symbols) left names nothing: `fallback` does."""
    text = "".join(c for c in _UNSAFE_IN_NAMES.sub(" ", title) if c == _ZWJ or unicodedata.category(c) != "Cf")
    name = " ".join(text.split())[:_MAX_CHARS]
    while len(name.encode()) > _MAX_BYTES:
        name = name[:-1]
    # A cut can end on a joiner; Windows drops trailing dots and spaces, and a leading dot hides a file.
    name = name.strip(" ." + _ZWJ)
    if not any(unicodedata.category(c)[0] in "LNS" for c in name):
        name = fallback
    stem = name + suffix
    if _WINDOWS_RESERVED.fullmatch(stem.split(".", 1)[0].rstrip()):
        stem += "_"
    return f"{stem}.{extension}"


def streamed_download(chunks: AsyncIterator[str], *, content_type: str, filename: str) -> StreamingHttpResponse:
    """`chunks` as an attachment named `filename`, streamed (under ASGI, page by page as read)."""
    response = StreamingHttpResponse(chunks, content_type=content_type)
    # filename*= (RFC 6266) for a name past ASCII: a title in any script comes through whole.
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
    # The data is the user's own: no shared or browser cache may keep a copy (it would also be stale,
    # the rows being read when asked for). nginx passes each page on instead of gathering the file.
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"
    return response
