"""The message ledger kept in DashboardTotals: up to `ledger_through_id`, how many messages the
conversation holds and the ids of its summaries (with counts by how each was made), so numbering
summaries, numbering messages and the headline's summary counts never read all of a long
conversation's messages to find its few summaries or to count its messages.

Readers take the ledger plus what comes after `ledger_through_id` (an index range over the messages
since), and the live count of summaries from the partial index msg_conv_summary_idx (`discarded`
changes after a summary is made; its other flags never do; messages are never deleted).

The ledger is extended when a turn ends, up to the message before the turn's reply, not to the
newest message: an id is taken when a row is inserted, and a summary (the worker, an edit: writers
that do not hold the conversation's send lock) is committed a few milliseconds later, so a message
with a smaller id than the newest one may not be visible yet. Everything before the reply (made
before the turn started) has had the whole streamed reply to commit; what comes after is read by
the readers' range until a later turn extends the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from chatapp.chat.models import Message
from chatapp.dashboard.models import DashboardTotals

# A summary row as the ledger reads it: id, edited_from_id, extractive, edited.
SUMMARY_ROW = ("id", "edited_from_id", "extractive", "edited")
LEDGER_FIELDS = (
    "ledger_through_id", "ledger_messages", "summary_ids", "summaries_made", "summaries_extractive",
    "summaries_edited",
)


@dataclass(frozen=True)
class SummaryScan:
    """A conversation's summary messages: ids in order (users' numbering and message numbers come
    from them), the headline's counts, and the ledger's message count for numbering messages."""

    ids: list[int]
    made: int  # summaries not made by editing another (an edit is a new version, not a new summary)
    live: int | None  # not discarded (counted only when asked for: ledger_read(live=True))
    extractive: int
    edited: int
    through_id: int | None  # the ledger's end: `messages` messages have an id up to it
    messages: int

    @property
    def numbers(self) -> dict[int, int]:
        """Summaries by their 1-based order in the conversation ("summary 3"), edits and discarded ones included."""
        return {pk: k for k, pk in enumerate(self.ids, start=1)}


def summary_rows(*, conversation_id: int, after: int | None, through: int | None) -> list[tuple[Any, ...]]:
    """The conversation's summaries with `after` < id <= `through` (None: unbounded), in order."""
    rows = Message.objects.filter(conversation_id=conversation_id, kind=Message.Kind.SUMMARY)
    if after is not None:
        rows = rows.filter(id__gt=after)
    if through is not None:
        rows = rows.filter(id__lte=through)
    return list(rows.order_by("id").values_list(*SUMMARY_ROW))


def ledger_fields(
    rows: Iterable[Sequence[Any]], *, through_id: int | None, messages: int, base: DashboardTotals | None = None
) -> dict[str, Any]:
    """`base`'s ledger (None: an empty one) extended through `through_id` with `messages` more messages
    and the summary `rows` among them, in order (pure: the rebuild and the data migration share it)."""
    ids = list(base.summary_ids) if base is not None else []
    made = base.summaries_made if base is not None else 0
    extractive = base.summaries_extractive if base is not None else 0
    edited = base.summaries_edited if base is not None else 0
    messages += base.ledger_messages if base is not None else 0
    for pk, edited_from_id, is_extractive, is_edited in rows:
        ids.append(pk)
        made += edited_from_id is None
        extractive += edited_from_id is None and bool(is_extractive)
        edited += bool(is_edited)
    return {
        "ledger_through_id": through_id, "ledger_messages": messages,
        "summary_ids": ids, "summaries_made": made, "summaries_extractive": extractive, "summaries_edited": edited,
    }


def ledger_extend(*, totals: DashboardTotals, through_id: int | None) -> dict[str, Any]:
    """The fields that extend `totals`' ledger (read under its lock) through `through_id`: one index
    range over the messages since the ledger's end (a turn's few); {} when there is nothing to extend."""
    current = totals.ledger_through_id
    if through_id is None or (current is not None and through_id <= current):
        return {}
    # Plain SQL: every turn's end runs it (chatapp.chat.rowsql says why).
    sql = f"SELECT kind, {', '.join(SUMMARY_ROW)} FROM {Message._meta.db_table} WHERE conversation_id = %s AND id <= %s"  # noqa: S608
    params = [totals.conversation_id, through_id]
    if current is not None:
        sql += " AND id > %s"
        params.append(current)
    with connection.cursor() as cursor:
        cursor.execute(sql + " ORDER BY id", params)
        new = cursor.fetchall()
    summaries = [row[1:] for row in new if row[0] == Message.Kind.SUMMARY]
    return ledger_fields(summaries, through_id=through_id, messages=len(new), base=totals)


def ledger_rebuild_fields(*, conversation_id: int, through_id: int | None) -> dict[str, Any]:
    """A ledger from scratch through `through_id` (None: an empty ledger; readers then read everything):
    the summaries, and a count of the messages on the (conversation, id) index."""
    if through_id is None:
        return ledger_fields([], through_id=None, messages=0)
    upto = Message.objects.filter(conversation_id=conversation_id, id__lte=through_id)
    return ledger_fields(
        summary_rows(conversation_id=conversation_id, after=None, through=through_id), through_id=through_id,
        messages=upto.count(),
    )


def ledger_read(*, conversation_id: int, totals: DashboardTotals | None = None, live: bool = False) -> SummaryScan:
    """The conversation's summaries: the ledger (read here unless `totals` is given), the summaries
    after it, and with `live` the count of those not discarded (on the partial index)."""
    if totals is None:
        totals = DashboardTotals.objects.filter(conversation_id=conversation_id).only(*LEDGER_FIELDS).first()
    after = totals.ledger_through_id if totals is not None else None
    rows = summary_rows(conversation_id=conversation_id, after=after, through=None)
    fields = ledger_fields(rows, through_id=after, messages=0, base=totals)
    live_count = None
    if live:
        summaries = Message.objects.filter(conversation_id=conversation_id, kind=Message.Kind.SUMMARY)
        live_count = summaries.filter(discarded=False).count()
    return SummaryScan(ids=fields["summary_ids"], made=fields["summaries_made"], live=live_count,
                       extractive=fields["summaries_extractive"], edited=fields["summaries_edited"],
                       through_id=after, messages=fields["ledger_messages"])
