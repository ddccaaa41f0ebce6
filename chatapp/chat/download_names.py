"""Downloads of a user's data (a chat's export, every chat, a chat's dashboard records): their file
names, after what they hold (a folder of downloads is read by name, not by id), and the streamed
response they all go out in, so each carries the same headers."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

# What no file name holds on Windows, macOS or Linux: the separators, the reserved characters, controls.
_UNSAFE_IN_NAMES = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f]+')


def download_filename(title: str, *, extension: str) -> str:
    """A download named after a chat's title ("Trip to Lisbon.md"), as Open WebUI and LibreChat name
    theirs. What a file name cannot hold becomes a space; a title with nothing left is "conversation"."""
    name = " ".join(_UNSAFE_IN_NAMES.sub(" ", title).split())[:100].strip(" .")
    return f"{name or 'conversation'}.{extension}"


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
