"""Writes on the message tree (issue 13, edit and branches): take part of the active path off it, bring
a branch back, thread bulk-written messages into one path.

The active path is the chat messages with `superseded=False` (models.Message). A child is always
written after its parent, so the path read in id order is the path from the root: every reader that
filters `superseded=False` (the window, recall, totals, the timeline) follows the active path with no
walk over the tree. A switch moves two sets, each found by one index read: the old path from the
branch point on (on the path, id >= the branch point) and the branch brought back (the rows tagged
with its first message's id when it was switched away from). Summaries follow the last message they
cover: one written on a branch is never sent on another.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery, Sum
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from chatapp.chat.branch_selectors import message_sibling_ids
from chatapp.chat.context import live_chat_q, offline_reply_q
from chatapp.chat.message_services import live_totals_add
from chatapp.chat.models import Conversation, Message
from chatapp.chat.search_services import message_index_move
from chatapp.chat.turn_claim import turn_busy_check


def _move(*, conversation_id: int, rows: QuerySet[Message], hide: bool, tag: int | None) -> int:
    """Flip `rows` on or off the active path, keeping the live totals and the recall index in step.

    Returns how many chat messages moved.
    """
    chat_ids = list(rows.filter(kind=Message.Kind.CHAT).values_list("id", flat=True))
    live = rows.filter(live_chat_q() if hide else Q(kind=Message.Kind.CHAT, status__in=Message.LIVE_STATUSES))
    offline = offline_reply_q()
    sums = live.aggregate(n=Count("id"), chars=Sum("char_count"), tokens=Sum("token_count"),
                          offline_n=Count("id", filter=offline), offline_chars=Sum("char_count", filter=offline),
                          offline_tokens=Sum("token_count", filter=offline))
    moved = rows.update(superseded=hide, off_path_by=tag, updated_at=timezone.now())
    if not moved:
        return 0
    sign = -1 if hide else 1
    if sums["n"]:
        live_totals_add(
            conversation_id=conversation_id,
            messages=sign * sums["n"],
            chars=sign * (sums["chars"] or 0),
            tokens=sign * (sums["tokens"] or 0),
            offline=(sign * sums["offline_n"], sign * (sums["offline_chars"] or 0),
                     sign * (sums["offline_tokens"] or 0)),
        )
    message_index_move(message_ids=chat_ids)  # off the path: neither recalled nor counted in BM25
    return len(chat_ids)


def branch_hide(*, conversation_id: int, start_id: int) -> int:
    """Take the active path from message `start_id` on off it (kept, tagged `start_id`), with the
    summaries that cover any of it. A window starting in that part is cleared: the next request refits
    the history of the path that remains. Call it inside a transaction holding the conversation's claim.
    """
    rows = Message.objects.filter(conversation_id=conversation_id, superseded=False).filter(
        Q(kind=Message.Kind.CHAT, id__gte=start_id) | Q(kind=Message.Kind.SUMMARY, covers_through_id__gte=start_id)
    )
    moved = _move(conversation_id=conversation_id, rows=rows, hide=True, tag=start_id)
    Conversation.objects.filter(pk=conversation_id, window_start_id__gte=start_id).update(window_start_id=None)
    return moved


def branch_show(*, conversation_id: int, start_id: int) -> int:
    """Bring back the branch that was active under message `start_id` when it was switched away from."""
    rows = Message.objects.filter(conversation_id=conversation_id, off_path_by=start_id)
    return _move(conversation_id=conversation_id, rows=rows, hide=False, tag=None)


_SWITCH_BUSY_WORDS = (
    "A reply is still being written in this chat (in another tab or device?). Wait for it or stop it, then "
    "switch versions."
)


def branch_switch(*, message: Message, index: int) -> Message:
    """Make the `index`-th sibling (1-based, id order) of `message` and the branch below it the active
    path; the branch shown before is kept, and comes back as it was when switched to again.

    ValidationError (400) for an index out of range or a message whose parent is not on the active path;
    code "conflict" (409) while a reply streams in the conversation.
    """
    siblings = message_sibling_ids(message=message)
    if not 1 <= index <= len(siblings):
        raise ValidationError({"index": f"Choose a branch from 1 to {len(siblings)}."}, code="invalid")
    target_id = siblings[index - 1]
    # A 404, not a 500, when another tab deleted the chat since the request found the message.
    conversation = get_object_or_404(Conversation, pk=message.conversation_id)
    # A claim marked while the path moves, already stale: a send that waited on this row (another tab)
    # finds it taken and goes the slow way, which reads the path's tail after this commit. Its claim's
    # one statement reads the tail as it was when it began (PostgreSQL), and would hang the new message
    # under the branch this switch hides. Stale, it keeps no send waiting and holds nothing. It is left
    # in place: given back in a statement of its own after the commit, it could be gone before the
    # waiting send re-checks the row, which would then take the fast way with the old tail. The next
    # send takes it over (the slow way, once).
    marked = timezone.now() - timedelta(seconds=settings.STREAM_ORPHAN_SECONDS + 1)
    with transaction.atomic():
        turn_busy_check(conversation_id=conversation.pk, busy_words=_SWITCH_BUSY_WORDS)  # none under a running turn
        on_path = Message.objects.filter(pk__in=siblings, superseded=False)
        current = on_path.order_by("id").values_list("id", flat=True).first()
        if current is None:
            raise ValidationError(
                "This message is not on the branch shown; switch the branch above it first.", code="off_path"
            )
        if current != target_id:
            Conversation.objects.filter(pk=conversation.pk).update(turn_claimed_at=marked)
            branch_hide(conversation_id=conversation.pk, start_id=current)
            branch_show(conversation_id=conversation.pk, start_id=target_id)
            # The path changed under the stored window: the next request refits the new path's history.
            Conversation.objects.filter(pk=conversation.pk).update(window_start_id=None)
    shown = Message.objects.filter(pk=target_id).first()
    if shown is None:  # deleted with its chat (another tab) the moment the switch was done
        raise Http404("No Message matches the given query.")
    return shown


def conversation_path_thread(*, conversation_id: int) -> None:
    """Give bulk-written chat messages with no parent their place in the tree: the previous chat
    message on the path in id order (a replaced reply and its replacement are siblings; each replaced
    reply is a branch of its own). For imports and seeds, which write rows without the services. Two
    statements whatever the length: each parent is one seek on msg_conv_path_idx."""
    chat = Message.objects.filter(conversation_id=conversation_id, kind=Message.Kind.CHAT)
    previous = chat.filter(superseded=False, id__lt=OuterRef("pk")).order_by("-id").values("id")[:1]
    chat.filter(parent__isnull=True).update(parent_id=Subquery(previous))
    chat.filter(superseded=True, off_path_by__isnull=True).update(off_path_by=F("id"))
