"""JSON text on a chat turn's path, written by orjson.

A turn writes some 40 KB of JSON: its SSE events and its optimization record's `sent` list (an
entry for each message sent). The standard library took about ten times as long for the same
text. Readers see the same JSON, and nothing is lost: a value orjson refuses (a lone surrogate a
model streamed, an integer beyond 64 bits, a key that is not a string) is written by the standard
library instead, as before. One difference: a float that is not a number (NaN, infinity) is
written as null, which JSON.parse and PostgreSQL's jsonb accept, where the standard library wrote
`NaN`, which neither does.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from django.core.serializers.json import DjangoJSONEncoder

# Dates go to DjangoJSONEncoder, as before: it writes them in milliseconds with a "Z".
_DJANGO_DEFAULT = DjangoJSONEncoder().default
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME
# orjson reads an integer past 64 bits as a float, silently: text with a run of 19 or more digits
# (every such integer has one) is left to the standard library, which keeps it exact.
_LONG_DIGITS = re.compile(r"\d{19}")


def event_json(value: Any) -> str:
    """`value` as json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False) reads."""
    try:
        return orjson.dumps(value, default=_DJANGO_DEFAULT, option=_OPTIONS).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)


class FastJSONEncoder(json.JSONEncoder):
    """A JSONField's encoder: the column's text by orjson, else the standard library's (which
    refuses what it always refused)."""

    def encode(self, o: Any) -> str:
        if self.sort_keys or self.indent is not None:  # asked for a form of the text (forms compare sorted)
            return super().encode(o)
        try:
            return orjson.dumps(o).decode()
        except TypeError:
            return super().encode(o)


class FastJSONDecoder(json.JSONDecoder):
    """A JSONField's decoder: the column's text read by orjson, else by the standard library (NaN,
    a lone surrogate, an integer past 64 bits: the values orjson refuses or would round)."""

    def decode(self, s: str, *args: Any) -> Any:
        if not _LONG_DIGITS.search(s):
            try:
                return orjson.loads(s)
            except orjson.JSONDecodeError:
                pass
        return super().decode(s, *args)
