"""Reads for read-only share links (issue 13): the owner's live links, a link by its public token, and
the messages a link's snapshot shows, a bounded page at a time.

A revoked or unknown token answers Http404, exactly like an owner's id that is not theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.shortcuts import get_object_or_404

from .models import ConversationShare, Message, MessageImage
from .reply_stream import INTERRUPTED_WORDS
from .token_models import key_digest

# Messages per page of the public page: a snapshot of 100k messages is read and rendered 200 at a
# time (keyset pages on the (conversation, id) index, oldest first), never whole.
SHARE_PAGE = 200

# What a reader of the conversation sees: the user's messages and the replies as they stand — no
# summaries (the reader has the messages they stand in for), no reply regenerated away, no failed
# reply (its error text may name the owner's endpoint), no reply still being written.
_SHOWN_STATUSES = (Message.Status.COMPLETE, Message.Status.STOPPED)
_SHOWN_ROLES = (Message.Role.USER, Message.Role.ASSISTANT)
# A reply not shown now that may be later, in the same row: still being written, or taken for dead by
# the orphan sweep (interrupted) while its stream may yet finish it (reply_store) or a Stop keep it.
_UNFINISHED = Q(status=Message.Status.STREAMING) | Q(status=Message.Status.ERROR, error=INTERRUPTED_WORDS)


@dataclass(frozen=True)
class SharePage:
    messages: list[Message]
    # The id to continue after (`?after=`), or None on the last page.
    next_after: int | None


def share_list(*, owner: User) -> QuerySet[ConversationShare]:
    """The owner's live links, newest first (index share_owner_live_id_idx), each with its chat (the list
    marks an archived one)."""
    return (
        ConversationShare.objects.filter(owner=owner, revoked_at__isnull=True)
        .select_related("conversation")
        .order_by("-created_at", "-id")
    )


def share_get(*, owner: User, pk: int) -> ConversationShare:
    """One of the owner's live links; another user's, a revoked or a missing one: 404."""
    return get_object_or_404(ConversationShare, owner=owner, pk=pk, revoked_at__isnull=True)


def share_get_public(*, token: str) -> ConversationShare:
    """The live link with this token, found by its digest (unique index share_digest_uniq); revoked or
    unknown: 404. So is the link of an account an admin turned off (is_active): it publishes nothing
    while the account can do nothing else, and opens again when the account is turned back on (nothing
    is revoked)."""
    return get_object_or_404(
        ConversationShare, digest=key_digest(token), revoked_at__isnull=True, owner__is_active=True
    )


def share_snapshot_tail(*, conversation_id: int) -> int | None:
    """The last message a link made now shows through: the active path's last one, unless that is a
    reply still being written, whose text comes after the link was made (its question is the end).
    So is one the orphan sweep took for dead (interrupted): its stream may yet finish it, stored
    complete in the same row (reply_store), and a link through it would then publish the whole reply."""
    return (
        Message.objects.filter(conversation_id=conversation_id, kind=Message.Kind.CHAT, superseded=False)
        .exclude(_UNFINISHED)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )


def share_snapshot_hidden(*, conversation_id: int, through_message_id: int) -> list[int] | None:
    """The snapshot's replies left out because they are unfinished now (_UNFINISHED): an older reply
    the sweep took for dead, the chat gone on past it, must not show whole when its stream ends after
    the link was made. None when there are none (the usual case). Read from the covering index
    msg_conv_id_idx (status is in it; only an error row's text is read from its row)."""
    ids = list(
        Message.objects.filter(
            _UNFINISHED, conversation_id=conversation_id, kind=Message.Kind.CHAT, superseded=False,
            id__lte=through_message_id,
        ).order_by("id").values_list("id", flat=True)
    )
    return ids or None


def share_messages(*, share: ConversationShare, after_id: int | None = None, limit: int = SHARE_PAGE) -> SharePage:
    """The snapshot's shown messages after `after_id` (from the start when None), oldest first, at
    most `limit`; later messages than the snapshot's last are never read.

    The snapshot is the path that ended at its last message when the link was made (issue 13,
    branches). While that message is still on the active path, the path up to it is exactly the
    active path's messages up to it (`superseded=False`, an index range); after a switch to another
    branch it is found by walking up its parents (a recursive query), so the link never shows what
    the owner switched to later nor what was edited away before sharing.
    """
    limit = max(1, min(int(limit), SHARE_PAGE))
    rows = _shown(share=share)
    if after_id is not None:
        rows = rows.filter(id__gt=after_id)
    # Whether each has images, in the same query: a page without any reads none (share_views).
    has_images = Exists(MessageImage.objects.filter(message_id=OuterRef("pk")))
    page: list[Message] = list(rows.annotate(has_images=has_images).order_by("id")[: limit + 1])
    if len(page) > limit:
        page = page[:limit]
        return SharePage(messages=page, next_after=page[-1].pk)
    return SharePage(messages=page, next_after=None)


def share_image_get(*, share: ConversationShare, pk: int) -> MessageImage:
    """The image `pk` of a message the share shows (its snapshot, less what it hides), or Http404."""
    return get_object_or_404(MessageImage, pk=pk, message_id__in=_shown(share=share).values("id"))


def _shown(*, share: ConversationShare) -> QuerySet[Message]:
    """The messages the share shows (see share_messages), unordered."""
    rows = Message.objects.filter(
        conversation_id=share.conversation_id,
        id__lte=share.through_message_id,
        kind=Message.Kind.CHAT,
        role__in=_SHOWN_ROLES,
        status__in=_SHOWN_STATUSES,
    )
    tail = Message.objects.filter(pk=share.through_message_id, conversation_id=share.conversation_id).values_list(
        "kind", "superseded").first()
    if tail is not None and tail == (Message.Kind.CHAT, True):
        rows = rows.filter(id__in=_ancestors(message_id=share.through_message_id))
    else:
        rows = rows.filter(superseded=False)
    if share.hidden_ids:
        rows = rows.exclude(id__in=share.hidden_ids)
    return rows


def _ancestors(*, message_id: int) -> RawSQL:
    """The ids of a message and of every message above it in the tree (SQLite and PostgreSQL both
    read a recursive common table expression inside IN). UNION, not UNION ALL: a row met again ends
    the walk, so parents that loop (rows no writer of the app makes) cannot keep a public page's query
    running, and growing its temporary results, for ever."""
    table = connection.ops.quote_name(Message._meta.db_table)
    # the only value is a bound parameter; the table name is the model's own, quoted
    return RawSQL(  # noqa: S611
        f"WITH RECURSIVE up(id, parent_id) AS (SELECT id, parent_id FROM {table} WHERE id = %s "  # noqa: S608
        f"UNION SELECT m.id, m.parent_id FROM {table} m JOIN up ON m.id = up.parent_id) SELECT id FROM up",
        (message_id,),
    )
