"""JSON bodies whose nesting a client cannot use against the server.

`json.loads` recurses once per nesting level: 100,000 `[` raised RecursionError, an HTML 500 on
every JSON endpoint. The body's size is bounded by DATA_UPLOAD_MAX_MEMORY_SIZE (settings), which
DRF applies when it reads a JSON or form body; api.errors answers it as a JSON 413.
"""

from __future__ import annotations

import io
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, FormParser, JSONParser, MultiPartParser


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("The JSON is nested too deeply.") from None


class SendJSONParser(BaseParser):
    """A send's JSON, which may carry images: read from the request as it comes, up to
    settings.SEND_MAX_BODY_BYTES. DRF reads a JSONParser's body through `request.body`, which Django
    holds to DATA_UPLOAD_MAX_MEMORY_SIZE (the ordinary limit); this parser is no JSONParser, so DRF
    hands it the stream. body_limit refused a larger body as it arrived already; this is the view's
    own bound."""

    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        limit = settings.SEND_MAX_BODY_BYTES
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            too_big = RequestDataTooBig("Request body exceeded settings.SEND_MAX_BODY_BYTES.")
            too_big.limit = limit  # type: ignore[attr-defined]  # what api.errors reports
            raise too_big
        return BoundedJSONParser().parse(io.BytesIO(raw), media_type, parser_context)


PARSERS = (BoundedJSONParser, FormParser, MultiPartParser)
SEND_PARSERS = (SendJSONParser, FormParser, MultiPartParser)
