"""The records downloads carry every field of a record, those the headline's figures are summed from
included: a download reconciles with the cards it stands beside."""

from __future__ import annotations

import csv
import io
import json

import pytest

from chatapp.chat.models import OptimizationRecord
from tests.dashboard.factories import make_conversation, make_record
from tests.support.streaming import streamed_body

pytestmark = pytest.mark.django_db


def _downloads(client, pk: int) -> tuple[list[dict], list[dict]]:
    text = streamed_body(client.get(f"/c/{pk}/dashboard/export.csv")).decode("utf-8-sig")
    data = json.loads(streamed_body(client.get(f"/c/{pk}/dashboard/export.json")))
    return list(csv.DictReader(io.StringIO(text))), data["records"]


def test_the_downloads_carry_the_dropped_and_cached_tokens_the_cards_sum(owner_client, user):
    # The headline splits the tokens not sent into "dropped with no summary" (the records' dropped_tokens)
    # and "replaced by summaries"; a provider's prompt cache lowers a turn's cost (provider_cached_tokens).
    # The downloads, "every record with every field", had neither column (nor the registry provider a
    # turn was priced by): the split on the card could not be found in them.
    c = make_conversation(owner=user, title="Split")
    make_record(conversation=c, tokens_full=500, tokens_sent=500, dropped_tokens=0)
    make_record(conversation=c, tokens_full=900, tokens_sent=400, strategy="truncate", triggered=True,
                dropped_tokens=350, provider_cached_tokens=256, registry_provider="openai")
    make_record(conversation=c, tokens_full=1100, tokens_sent=450, dropped_tokens=None)  # never measured
    rows, records = _downloads(owner_client, c.pk)
    headline = owner_client.get(f"/api/dashboard/conversations/{c.pk}/").json()["tokens"]

    assert [r["dropped_tokens"] for r in rows] == ["0", "350", ""]
    assert [r["dropped_tokens"] for r in records] == [0, 350, None]
    assert sum(int(r["dropped_tokens"] or 0) for r in rows) == headline["dropped"] == 350
    assert sum(1 for r in rows if r["dropped_tokens"] == "") == headline["dropped_unmeasured"] == 1
    assert [r["provider_cached_tokens"] for r in rows] == ["", "256", ""]
    assert [r["provider_cached_tokens"] for r in records] == [None, 256, None]
    assert [r["registry_provider"] for r in rows] == ["", "openai", ""]
    assert records[1]["registry_provider"] == "openai"


def test_every_field_of_a_record_is_in_both_downloads(owner_client, user):
    c = make_conversation(owner=user)
    make_record(conversation=c, tokens_full=100, tokens_sent=100)
    rows, records = _downloads(owner_client, c.pk)
    # (the conversation is the download's own, named in the JSON's head)
    fields = {f.attname for f in OptimizationRecord._meta.concrete_fields} - {"conversation_id"}
    assert fields - set(rows[0]) == set()
    assert fields - set(records[0]) == set()
