"""JSON bodies whose nesting a client cannot use against the server.

`json.loads` recurses once per nesting level: 100,000 `[` raised RecursionError, an HTML 500 on
every JSON endpoint. The body's size is bounded by DATA_UPLOAD_MAX_MEMORY_SIZE (settings), which
DRF applies when it reads a JSON or form body; api.errors answers it as a JSON 413.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("The JSON is nested too deeply.") from None


PARSERS = (BoundedJSONParser, FormParser, MultiPartParser)
