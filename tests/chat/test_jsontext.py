"""JSON text on a turn's path (chatapp.chat.jsontext): the same JSON as the standard library wrote,
whatever the value, and nothing refused that was written before."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from hypothesis import given
from hypothesis import strategies as st

from chatapp.chat.jsontext import FastJSONEncoder, event_json


def stdlib(value: object) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)


# Text includes lone surrogates (a model may stream half a pair) and integers go past 64 bits: the
# values orjson refuses.
scalars = (
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(st.characters() | st.characters(categories=["Cs"]))
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(values)
def test_events_read_as_the_standard_library_wrote_them(value):
    assert json.loads(event_json(value)) == json.loads(stdlib(value))


@given(values)
def test_a_json_column_reads_as_the_standard_library_wrote_it(value):
    assert json.loads(json.dumps(value, cls=FastJSONEncoder)) == json.loads(json.dumps(value))


def test_dates_decimals_and_text_as_django_writes_them():
    value = {
        "at": dt.datetime(2026, 11, 27, 21, 5, 45, 123456, tzinfo=dt.UTC),
        "day": dt.date(2026, 11, 27),
        "cost": Decimal("0.000120"),
        "text": "naïve café — 東京 🎉",
    }
    assert event_json(value) == stdlib(value).replace(", ", ",").replace(": ", ":")
    assert '"2026-11-27T21:05:45.123Z"' in event_json(value)


def test_a_lone_surrogate_is_still_written():
    # The SSE transport turns it into a JSON escape the client joins with the other half.
    assert event_json({"text": "\ud83d"}) == stdlib({"text": "\ud83d"})


def test_a_column_refuses_what_the_standard_library_refuses():
    with pytest.raises(TypeError):
        json.dumps({"ids": {1, 2}}, cls=FastJSONEncoder)


def test_a_column_asked_for_sorted_keys_gets_them():
    # Django's forms.JSONField compares values as sorted text.
    assert json.dumps({"b": 1, "a": 2}, cls=FastJSONEncoder, sort_keys=True) == '{"a": 2, "b": 1}'
