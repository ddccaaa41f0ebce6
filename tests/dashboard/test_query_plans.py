"""The dashboard's reads over a long conversation's messages have an index to go through (PostgreSQL:
the statements the selectors run, captured and EXPLAINed with sequential and bitmap scans disabled,
so the plan names the index the planner would reach for once the table is large). Losing one of
these indexes once made every dashboard load read all 100,000 messages of a conversation three times
(the message-tree migration replaced the summary index)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatapp.dashboard.figures import dashboard_message_numbers
from chatapp.dashboard.ledger import ledger_read
from chatapp.dashboard.message_map import dashboard_message_map

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("query plans: PostgreSQL")


def _plans(run: Callable[[], object], *, reading: str) -> list[str]:
    """The plans of the statements `run` executes whose SQL contains `reading`."""
    with CaptureQueriesContext(connection) as captured:
        run()
    statements = [q["sql"] for q in captured.captured_queries if reading in q["sql"]]
    assert statements, f"no statement with {reading!r}"
    plans = []
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        # And no bitmap scans: between a plain and an index-only scan of the same index the planner
        # takes the index-only one exactly when the index holds every column the query reads, which
        # is what the map's test asks, whatever the test table's statistics.
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        for sql in statements:
            cursor.execute("EXPLAIN " + sql)
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    return plans


def test_the_ledgers_summary_reads_use_the_summary_index(small):
    plans = _plans(lambda: ledger_read(conversation_id=small.conversation.pk, live=True), reading="'summary'")
    assert len(plans) == 2  # the summaries after the ledger's end, and the live ones counted
    for plan in plans:
        assert "msg_conv_summary_idx" in plan, plan


def test_the_message_map_is_read_from_the_conversation_index_alone(small):
    (plan,) = _plans(lambda: dashboard_message_map(conversation=small.conversation), reading="CASE WHEN")
    assert "Index Only Scan using msg_conv_id_idx" in plan, plan


def test_the_numbering_reads_the_replaced_versions_on_their_own_index(small):
    ids = list(small.conversation.messages.order_by("id").values_list("id", flat=True)[:3])
    scan = ledger_read(conversation_id=small.conversation.pk)
    (plan,) = _plans(lambda: dashboard_message_numbers(conversation_id=small.conversation.pk, ids=ids, scan=scan),
                     reading="\"superseded\"")
    assert "msg_conv_superseded_idx" in plan, plan
