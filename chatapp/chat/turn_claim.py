"""One turn at a time per conversation: the claim a turn takes when it starts and gives back when its
reply is stored (`Conversation.turn_claimed_at`).

A send takes it with one conditional UPDATE that also counts the new message into the live totals,
sets the title a first message gives, and returns the tail of the active path (the new message's
parent): the message is then stored (on PostgreSQL, for a plain send, by the same statement:
`send_claim_store`) and acknowledged before the context is packed, and the packing
(`chat_turn.turn_pack`) runs under the claim. Only a claim that is already held goes the slow way
(`turn_busy_check`): the row locked, then a reply still streaming or a claim younger than
settings.STREAM_ORPHAN_SECONDS answers "conflict"; anything older was left by a turn that died.

A turn brings an archived chat back to the sidebar (it is activity, as updated_at says): the claim
clears `archived_at` in the same statement.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Q
from django.http import Http404
from django.utils import timezone

from chatapp.chat.image_models import MessageImage
from chatapp.chat.image_services import ImageUpload, message_images_store
from chatapp.chat.models import Conversation, Message
from chatapp.chat.rowsql import Statement, row_create, row_create_parts, row_created
from chatapp.chat.search_services import message_index_sync

BUSY_WORDS = (
    "A reply is still being written in this chat (in another tab or device?). Wait for it or stop it, then "
    "send again: your text is kept."
)
REPEATED_WORDS = "This message was already sent (the same send arrived twice)."


class RepeatedSend(ValidationError):
    """A send or edit whose idempotency key is stored already: a 409 that says `repeated` (stream_views),
    so a page that sent it again after its answer was lost knows it is stored, not refused."""

    def __init__(self) -> None:
        super().__init__(REPEATED_WORDS, code="conflict")
LEFT_BEHIND_WORDS = (
    "This chat went on in another tab or device since this page showed it: the message you answered is no "
    "longer its latest. Nothing was sent; the chat now shows where it is."
)


@dataclass(frozen=True, slots=True)
class SendClaim:
    claimed_at: datetime
    title: str
    first: bool  # no sendable message before this one: the chat's first exchange
    parent_id: int | None  # the tail of the active path


# RETURNING is PostgreSQL's and SQLite's (3.35+). The SET expressions read the row as it was, so `first`
# and the title are decided atomically with the claim; the tail of the path is read in the same
# statement (msg_conv_path_idx).
_CLAIM_SQL = (
    "UPDATE chat_conversation SET turn_claimed_at = %s, updated_at = %s, archived_at = NULL, "
    "title = CASE WHEN title_is_custom OR live_message_count > 0 THEN title ELSE %s END, "
    "live_message_count = live_message_count + 1, live_char_count = live_char_count + %s, "
    "live_token_count = live_token_count + %s "
    "WHERE id = %s AND turn_claimed_at IS NULL "
    "RETURNING title, live_message_count, "
    "(SELECT m.id FROM chat_message m WHERE m.conversation_id = %s AND m.kind = 'chat' AND NOT m.superseded "
    "ORDER BY m.id DESC LIMIT 1) AS tail"
)


def _send_claim_try(*, conversation_id: int, chars: int, tokens: int, title: str) -> SendClaim | None:
    now = timezone.now()
    stamp = connection.ops.adapt_datetimefield_value(now)  # stored as the ORM stores it (compared on release)
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_SQL, [stamp, stamp, title, chars, tokens, conversation_id, conversation_id])
        row = cursor.fetchone()
    if row is None:
        return None
    stored_title, live_count, tail = row
    return SendClaim(claimed_at=now, title=stored_title, first=live_count == 1, parent_id=tail)


def send_store(
    *, conversation: Conversation, text: str, tokens: int, title: str, client_key: str, parent_id: int | None,
    images: Sequence[ImageUpload],
) -> tuple[SendClaim, Message, list[MessageImage]]:
    """Claim the conversation and store the user's message (`text`, `tokens` with its images') and its
    images: on PostgreSQL a plain send is one statement (send_claim_store); anything else, or a send
    that finds the claim held, one transaction (a commit costs an fsync on PostgreSQL, and the first
    byte waits for it). Raises as `send_claim_take`, and IntegrityError for a client key stored already."""
    message = {"conversation": conversation, "role": Message.Role.USER, "content": text, "token_count": tokens,
               "char_count": len(text), "client_key": client_key}
    if not images and parent_id is None:
        together = send_claim_store(conversation=conversation, chars=len(text), tokens=tokens, title=title,
                                    message=message)
        if together is not None:
            return (*together, [])
    with transaction.atomic():
        claim = send_claim_take(conversation=conversation, client_key=client_key, chars=len(text), tokens=tokens,
                                title=title, parent_id=parent_id)
        user_message = row_create(Message, parent_id=claim.parent_id, **message)
        return claim, user_message, message_images_store(message=user_message, uploads=images)


def send_claim_store(
    *, conversation: Conversation, chars: int, tokens: int, title: str, message: dict[str, Any],
) -> tuple[SendClaim, Message] | None:
    """The claim and the user's message (`message`: its fields but the parent, which is the path's
    tail) in one statement, on PostgreSQL; None where that cannot be (SQLite has no data-modifying
    WITH) or the claim is held: the caller then takes the transaction of `send_claim_take`.

    Why: a send's claim and message were four round trips (BEGIN, the claim, the insert, COMMIT);
    one statement is its own transaction. The three saved come to about 0.6 % of a turn's
    instructions (bench/turn_instructions.py; README, "Where PostgreSQL's extra CPU is"), and the
    first byte waits for one round trip, not four. Nothing is stored unless both are: a held claim
    inserts no row, and a refused insert (a repeated client key) undoes the claim with it.
    """
    if connection.vendor != "postgresql":
        return None
    now = timezone.now()
    stamp = connection.ops.adapt_datetimefield_value(now)
    obj, pairs = row_create_parts(Message, **message)
    params = [stamp, stamp, title, chars, tokens, conversation.pk, conversation.pk]
    params += [value for column, value in pairs if column != _PARENT]
    sql = _claim_store_sql(tuple(column for column, _ in pairs))
    # Inside a transaction (a test's), a savepoint: a refused insert must not abort the caller's.
    inside = transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
    with inside, connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    stored_title, live_count, tail, message_id = row
    claim = SendClaim(claimed_at=now, title=stored_title, first=live_count == 1, parent_id=tail)
    _claim_follow(conversation=conversation, claim=claim, chars=chars, tokens=tokens)
    obj.parent_id = tail
    return claim, row_created(obj, pk=message_id)


_PARENT = '"parent_id"'  # as rowsql quotes it on PostgreSQL


@functools.lru_cache(maxsize=4)
def _claim_store_sql(columns: tuple[str, ...]) -> str:
    if _PARENT not in columns:  # else the parent would go in as a value: the path broken
        raise ValueError(f"no {_PARENT} among the message's columns")
    values = ", ".join("c.tail" if column == _PARENT else "%s" for column in columns)
    return (f"WITH c AS ({_CLAIM_SQL}), i AS (INSERT INTO chat_message ({', '.join(columns)}) "  # noqa: S608
            f"SELECT {values} FROM c RETURNING id) SELECT c.title, c.live_message_count, c.tail, i.id FROM c, i")


def _claim_follow(*, conversation: Conversation, claim: SendClaim, chars: int, tokens: int) -> None:
    # The caller's instance follows along, as message_append keeps it.
    conversation.title = claim.title
    conversation.live_message_count += 1
    conversation.live_char_count += chars
    conversation.live_token_count += tokens
    conversation.turn_claimed_at = claim.claimed_at
    conversation.archived_at = None


def send_claim_take(
    *, conversation: Conversation, client_key: str, chars: int, tokens: int, title: str,
    parent_id: int | None = None,
) -> SendClaim:
    """Claim the conversation for a send of a message of `chars` characters and `tokens` tokens (counted
    into the live totals here); inside the transaction that stores the message. ValidationError
    "conflict" while another turn runs or `client_key` was already sent and is still streaming, and
    when `parent_id` (the message the sender answers) is no longer the active path's tail: the caller's
    transaction then rolls the claim back."""
    claim = _send_claim_try(conversation_id=conversation.pk, chars=chars, tokens=tokens, title=title)
    if claim is None:
        turn_busy_check(conversation_id=conversation.pk, client_key=client_key)
        # Not busy: the claim was left by a turn that died. Under the row lock it is ours to take.
        Conversation.objects.filter(pk=conversation.pk).update(turn_claimed_at=None)
        claim = _send_claim_try(conversation_id=conversation.pk, chars=chars, tokens=tokens, title=title)
        if claim is None:
            raise Http404("No such conversation.")
        # That turn may have died before packing (a killed process, or a client gone while the view
        # stored the message, so the body that packs never ran): its message, the path's tail, was then
        # never indexed, and search and recall would never find it. Idempotent. Only a user message: a
        # reply still streaming is indexed by its own end (reply_store inserts its row).
        if claim.parent_id is not None:
            tail = Message.objects.filter(pk=claim.parent_id, role=Message.Role.USER).values_list("id", flat=True)
            message_index_sync(message_ids=list(tail))
    if parent_id is not None and claim.parent_id != parent_id:
        # Continue pressed on a page left behind: another tab continued, regenerated or switched away
        # from that reply since. Chained after the chat's new tail, the words would ask the model to
        # go on from a reply that is not the one meant.
        raise ValidationError(LEFT_BEHIND_WORDS, code="conflict")
    _claim_follow(conversation=conversation, claim=claim, chars=chars, tokens=tokens)
    return claim


def turn_busy_check(*, conversation_id: int, client_key: str = "", busy_words: str = BUSY_WORDS) -> None:
    """Lock the conversation's row until the transaction ends and refuse (ValidationError "conflict") a
    repeated client key, a reply still streaming there, or a turn that claimed it and has not yet
    written its reply (`busy_words`: what the refusal says). A branch switch checks this; a turn start
    then takes the claim."""
    claims = list(
        Conversation.objects.select_for_update().filter(pk=conversation_id).values_list("turn_claimed_at", flat=True)
    )
    if not claims:  # deleted (another tab) since the request found it
        raise Http404("No such conversation.")
    claimed_at = claims[0]
    fresh = timezone.now() - timedelta(seconds=settings.STREAM_ORPHAN_SECONDS)
    live = Q(status=Message.Status.STREAMING, updated_at__gte=fresh)
    if client_key:
        live |= Q(client_key=client_key)
    # Unordered: served by the streaming partial index and the client-key unique index, never by a
    # walk over the conversation's messages in id order.
    clashes = list(Message.objects.filter(live, conversation_id=conversation_id).order_by().values_list(
        "client_key", flat=True)[:2])
    if client_key and client_key in clashes:
        raise RepeatedSend
    if clashes or (claimed_at is not None and claimed_at >= fresh and not _turn_over(conversation_id=conversation_id)):
        raise ValidationError(busy_words, code="conflict")


def _turn_over(*, conversation_id: int) -> bool:
    """The turn holding a fresh claim has ended all but its bookkeeping: the path ends with its reply, no
    longer streaming. A reply stopped after its process died (a restart mid-reply) leaves the claim for
    STREAM_ORPHAN_SECONDS, and Stop, which the page then offers, would free nothing meanwhile; a live
    process stores the stop within a second, and its release leaves a claim taken since alone. While a
    turn is packed the path ends with its user message. One seek on msg_conv_path_idx."""
    tail = Message.objects.filter(conversation_id=conversation_id, kind=Message.Kind.CHAT, superseded=False).order_by(
        "-id").values_list("role", "status").first()
    return tail is not None and tail[0] == Message.Role.ASSISTANT and tail[1] != Message.Status.STREAMING


def turn_claim_take(*, conversation_id: int, client_key: str = "") -> datetime:
    """Claim the conversation for a turn that starts from an existing message (regenerate, retry,
    edit): the slow way, with the checks it makes anyway. Returns the claim, for its release."""
    turn_busy_check(conversation_id=conversation_id, client_key=client_key)
    now = timezone.now()
    Conversation.objects.filter(pk=conversation_id).update(turn_claimed_at=now, archived_at=None)
    return now


# The end of a turn: the reply counted into the live totals and the claim given back if it is still
# this turn's (CASE: a claim taken over as stale belongs to the newer turn; NULL never equals), in one
# statement of plain SQL (rowsql says why).
_RELEASE_SQL = (
    "UPDATE chat_conversation SET live_message_count = live_message_count + %s, "
    "live_char_count = live_char_count + %s, live_token_count = live_token_count + %s, "
    "offline_reply_count = offline_reply_count + %s, offline_reply_chars = offline_reply_chars + %s, "
    "offline_reply_tokens = offline_reply_tokens + %s, updated_at = %s, "
    "turn_claimed_at = CASE WHEN turn_claimed_at = %s THEN NULL ELSE turn_claimed_at END WHERE id = %s"
)


def turn_claim_release(*, conversation_id: int, claimed_at: datetime | None) -> None:
    """Give the claim back if it is still the one taken at `claimed_at` (a turn that stored no reply
    to count); updated_at is touched. A reply's end does it with its counts: `turn_claim_release_statement`."""
    with connection.cursor() as cursor:
        cursor.execute(*turn_claim_release_statement(conversation_id=conversation_id, claimed_at=claimed_at))


def turn_claim_release_statement(
    *, conversation_id: int, claimed_at: datetime | None, messages: int = 0, chars: int = 0, tokens: int = 0,
    offline: bool = False,
) -> Statement:
    """The UPDATE, as (sql, params) to run with other tables' writes (`statements_run`), that gives the
    claim back if it is still the one taken at `claimed_at`, counting `messages` more live messages of
    `chars` characters and `tokens` tokens (`offline`: the offline demo model's replies, counted apart
    as well); updated_at is touched."""
    ops = connection.ops
    claim = ops.adapt_datetimefield_value(claimed_at) if claimed_at is not None else None
    apart = [messages, chars, tokens] if offline else [0, 0, 0]
    return _RELEASE_SQL, [messages, chars, tokens, *apart, ops.adapt_datetimefield_value(timezone.now()), claim,
                          conversation_id]
