"""The dashboard's reads over a long conversation's messages have an index to go through (PostgreSQL:
each statement EXPLAINed with sequential and bitmap scans disabled, so the plan names the index the
planner would reach for once the table is large). Losing one of these indexes once made every dashboard load
read all 100,000 messages of a conversation three times (migration 0012 replaced the summary index)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.models import QuerySet

from chatapp.chat.models import Message
from chatapp.dashboard import message_map
from chatapp.dashboard.ledger import SUMMARY_ROW

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("query plans: PostgreSQL")


def _plan(query: QuerySet[Any] | Any) -> str:
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        # And no bitmap scans: between a plain and an index-only scan of the same index the planner
        # takes the index-only one exactly when the index holds every column the query reads, which
        # is what the map's test asks, whatever the test table's statistics.
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.fixture
def messages(small) -> Iterator[Any]:
    yield Message.objects.filter(conversation=small.conversation)


def test_the_ledgers_summary_reads_use_the_summary_index(messages, small):
    after = messages.filter(kind=Message.Kind.SUMMARY, id__gt=small.m[0].pk).order_by("id").values_list(*SUMMARY_ROW)
    live = messages.filter(kind=Message.Kind.SUMMARY, discarded=False).values("id")
    for query in (after, live):
        assert "msg_conv_summary_idx" in _plan(query)


def test_the_message_map_is_read_from_the_conversation_index_alone(messages, small):
    status = message_map._map_status_expression(origin_ids={"verbatim": [small.m[-1].pk]}, horizon=small.m[-1].pk,
                                                covered=None, dropped=[])
    query = (
        messages.filter(superseded=False).order_by("id")
        .annotate(map_code=status * 4 + message_map._ROLE_CODE).values_list("id", "map_code")
    )
    assert "Index Only Scan using msg_conv_id_idx" in _plan(query)
