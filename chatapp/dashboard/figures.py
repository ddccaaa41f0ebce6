"""Reads shared by the dashboard's selectors, sized for long conversations: the stored totals (a row
found behind the records is rebuilt), a record's turn number and a page of records through the turn
blocks, and users' numbering of messages by counting (with the message ledger: ledger.py).
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any

from django.db.models import F, OuterRef, Q, Subquery

from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.dashboard.ledger import SummaryScan
from chatapp.dashboard.models import DashboardTotals, DashboardTurnBlock
from chatapp.dashboard.totals import BLOCK_TURNS, dashboard_totals_rebuild

logger = logging.getLogger(__name__)

# Wanted ids closer than this are numbered from one read of the ids between them; farther apart,
# each group is placed by a count of the messages before it.
_NUMBERING_GAP = 512


def totals_tokens(totals: DashboardTotals) -> dict[str, int]:
    """The turns and tokens (full, sent, saved) every view of the stored totals opens with."""
    return {
        "turns": totals.turns,
        "tokens_full": totals.tokens_full,
        "tokens_sent": totals.tokens_sent,
        "tokens_saved": totals.tokens_full - totals.tokens_sent,
    }


def dashboard_totals_get(*, conversation: Conversation) -> DashboardTotals:
    """The conversation's totals in one query: the row, with the newest record's id beside it.

    A row missing while records exist, or behind the newest record (records written around the
    services: a restore, a script), is rebuilt from the records once, here, and the rebuild logged.
    Without records the answer is an unsaved row of zeros.
    """
    newest = OptimizationRecord.objects.filter(conversation_id=OuterRef("conversation_id")).order_by("-id")
    totals = (
        DashboardTotals.objects.filter(conversation_id=conversation.pk)
        .annotate(newest_record_id=Subquery(newest.values("id")[:1]))
        .first()
    )
    if totals is None:
        if not OptimizationRecord.objects.filter(conversation_id=conversation.pk).exists():
            return DashboardTotals(conversation_id=conversation.pk)
    elif totals.newest_record_id == totals.last_record_id:  # type: ignore[attr-defined]
        return totals
    logger.warning("dashboard totals of conversation %s were behind its records: rebuilt", conversation.pk)
    return dashboard_totals_rebuild(conversation=conversation)


def dashboard_totals_heal(*, owner: Any) -> None:
    """Rebuild the totals of the owner's conversations found behind their records (as
    dashboard_totals_get does for one), before a read across them: one query finds them."""
    newest = OptimizationRecord.objects.filter(conversation_id=OuterRef("pk")).order_by("-id").values("id")[:1]
    counted = DashboardTotals.objects.filter(conversation_id=OuterRef("pk")).values("last_record_id")[:1]
    behind = (
        Conversation.objects.filter(owner=owner)
        .annotate(newest=Subquery(newest), counted=Subquery(counted))
        .filter(Q(counted__isnull=True) | ~Q(counted=F("newest")), newest__isnull=False)
    )
    for conversation in behind.only("pk"):
        logger.warning("dashboard totals of conversation %s were behind its records: rebuilt", conversation.pk)
        dashboard_totals_rebuild(conversation=conversation)


def dashboard_record_turn(*, conversation: Conversation, record_id: int) -> int:
    """A record's 1-based turn number: its block (one seek) and a count of at most BLOCK_TURNS rows."""
    block = (
        DashboardTurnBlock.objects.filter(conversation_id=conversation.pk, last_record_id__gte=record_id)
        .order_by("last_record_id")
        .values_list("number", "first_record_id")
        .first()
    )
    records = OptimizationRecord.objects.filter(conversation_id=conversation.pk, id__lte=record_id)
    if block is None or block[1] > record_id:
        return records.count()  # not a record of the blocks (none yet): count them all
    return block[0] * BLOCK_TURNS + records.filter(id__gte=block[1]).count()


def dashboard_record_rows(*, conversation: Conversation, offset: int, limit: int, fields: Iterable[str]) -> list[dict]:
    """Records `offset` … `offset + limit - 1` (0-based, turn order) as dicts of `fields`: the block
    holding the first gives an id to start from, so a page deep in a long conversation skips no rows."""
    start = (
        DashboardTurnBlock.objects.filter(conversation_id=conversation.pk, number=offset // BLOCK_TURNS)
        .values_list("first_record_id", flat=True)
        .first()
    )
    records = OptimizationRecord.objects.filter(conversation_id=conversation.pk).order_by("id").values(*fields)
    if start is None:
        return list(records[offset : offset + limit])
    skip = offset % BLOCK_TURNS
    return list(records.filter(id__gte=start)[skip : skip + limit])


def dashboard_message_numbers(*, conversation_id: int, ids: Iterable[int], scan: SummaryScan) -> dict[int, int]:
    """Users' numbering (selectors.message_numbers: a chat message's 1-based position among the
    conversation's chat messages on the path shown; an id that is not one gets the number of the one
    before it), without reading every id: the ids are grouped when close, the messages before each
    group counted from whichever end is nearer (the conversation's start, or the ledger's end, whose
    message count is stored), the ids inside the groups read (one query), and the summaries (`scan`,
    in order) and the replaced versions (regenerated replies, edited questions: few, on their own
    index) subtracted.
    """
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return {}
    groups: list[list[int]] = [[wanted[0], wanted[0]]]
    for pk in wanted[1:]:
        if pk - groups[-1][1] <= _NUMBERING_GAP:
            groups[-1][1] = pk
        else:
            groups.append([pk, pk])
    messages = Message.objects.filter(conversation_id=conversation_id)
    inside = Q()
    for lo, hi in groups:
        inside |= Q(id__gte=lo, id__lte=hi)
    present = list(messages.filter(inside).order_by("id").values_list("id", flat=True))
    out = {}
    for lo, hi in groups:
        before = _messages_before(messages, lo=lo, scan=scan)
        skip = bisect_right(present, lo - 1)
        for pk in wanted[bisect_right(wanted, lo - 1) : bisect_right(wanted, hi)]:
            out[pk] = before + bisect_right(present, pk) - skip - bisect_right(scan.ids, pk)
    replaced = list(
        messages.filter(kind=Message.Kind.CHAT, superseded=True, id__lte=wanted[-1]).order_by("id")
        .values_list("id", flat=True)
    )
    return {pk: number - bisect_right(replaced, pk) for pk, number in out.items()}


def _messages_before(messages: Any, *, lo: int, scan: SummaryScan) -> int:
    """How many of the conversation's messages have an id below `lo`: one count over the index, from
    the start or back from the ledger's end, whichever spans fewer ids."""
    through = scan.through_id
    if through is None or lo - 1 <= through - lo:
        return int(messages.filter(id__lt=lo).count())
    if lo <= through:
        return scan.messages - int(messages.filter(id__gte=lo, id__lte=through).count())
    return scan.messages + int(messages.filter(id__gt=through, id__lt=lo).count())
