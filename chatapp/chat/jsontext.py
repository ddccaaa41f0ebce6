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
from typing import Any

import orjson
from django.core.serializers.json import DjangoJSONEncoder

# Dates go to DjangoJSONEncoder, as before: it writes them in milliseconds with a "Z".
_DJANGO_DEFAULT = DjangoJSONEncoder().default
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME


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
