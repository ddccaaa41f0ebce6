"""Regenerate, Retry and Edit: a turn started again from an existing message (see chat_turn).

Each adds a sibling (issue 13, branches): Regenerate and Retry a new reply to the same user message,
Edit a new user message under the same parent. What it replaces goes off the active path with what
followed it (branch_services: kept, shown as `n/m`, never sent), under the conversation's claim, so
two tabs or a double click start one turn, not two.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.shortcuts import get_object_or_404
from django.utils import timezone

from chatapp.chat.branch_services import branch_hide
from chatapp.chat.chat_turn import target_for
from chatapp.chat.image_services import images_tokens, message_images_copy
from chatapp.chat.layout import new_message_place
from chatapp.chat.message_services import (
    client_key_validate,
    message_append,
    message_content_validate,
    message_serialize,
)
from chatapp.chat.models import Conversation, Message
from chatapp.chat.search_services import message_index_sync
from chatapp.chat.turn_claim import RepeatedSend, turn_claim_take
from chatapp.chat.turn_types import TurnStart


def _conversation_of(*, message: Message) -> Conversation:
    """A 404 when the conversation was deleted (another tab) since the request found the message."""
    return get_object_or_404(Conversation.objects.select_related("llm_config", "owner"), pk=message.conversation_id)


def chat_regenerate_start(*, user: User, reply: Message) -> TurnStart:
    """Answer the same user message again: a sibling reply; the old one stays as a branch, never sent."""
    if reply.role != Message.Role.ASSISTANT or reply.kind != Message.Kind.CHAT or reply.reply_to_id is None:
        raise ValidationError("Only a model reply can be regenerated.", code="not_a_reply")
    if reply.status == Message.Status.STREAMING:
        raise ValidationError("This reply is still streaming; stop it first.", code="streaming")
    if reply.superseded:
        raise ValidationError("This reply is not on the branch shown (replaced, or another branch).", code="superseded")
    user_message = get_object_or_404(Message, pk=reply.reply_to_id)
    latest_exchange_check(user_message=user_message)
    conversation = _conversation_of(message=reply)
    with transaction.atomic():
        claimed_at = turn_claim_take(conversation_id=conversation.pk)  # one turn at a time, as for sends
        # The reply's own claim: of two concurrent regenerates (two tabs, a double click) only the one that
        # finds the reply still on the path goes on; the other would start a second streaming reply.
        claimed = Message.objects.filter(pk=reply.pk, superseded=False, status=reply.status).update(
            updated_at=timezone.now()
        )
        if not claimed:
            raise ValidationError(
                "This reply was just replaced or changed (another tab or a second click?). "
                "Reload the conversation to see the newest reply.",
                code="conflict",
            )
        branch_hide(conversation_id=conversation.pk, start_id=reply.pk)  # a branch now, not recalled
    conversation.refresh_from_db()
    return _existing_start(user=user, conversation=conversation, user_message=user_message, claimed_at=claimed_at)


def _existing_start(
    *, user: User, conversation: Conversation, user_message: Message, claimed_at: datetime
) -> TurnStart:
    """A turn that answers a message already stored (regenerate, retry): `accepted` says only the title."""
    return TurnStart(
        user=user, conversation=conversation, user_message=user_message, target=target_for(conversation=conversation),
        through_id=user_message.pk, claimed_at=claimed_at, accepted={"user_message": None, "title": conversation.title},
    )


def _retry_last_reply(*, message: Message) -> Message | None:
    return Message.objects.filter(reply_to=message, superseded=False).order_by("-id").first()


def chat_retry_start(*, user: User, message: Message) -> TurnStart:
    """Send a user message again after its reply failed or was stopped (or never came).

    The failed or stopped reply stays as a branch (a sibling of the new attempt), off the path: a
    stopped one is sent as far as it went until then (context.live_chat_q), no longer after.
    """
    if message.role != Message.Role.USER or message.kind != Message.Kind.CHAT:
        raise ValidationError("Only your own message can be retried.", code="not_user_message")
    latest_exchange_check(user_message=message)
    last = _retry_last_reply(message=message)
    if last is not None:
        # A live stream touches its row every few seconds (reply_stream's heartbeat); one silent for
        # STREAM_ORPHAN_SECONDS has no process behind it, the same clock a send's busy check reads.
        stale = last.status == Message.Status.STREAMING and last.updated_at < timezone.now() - timedelta(
            seconds=settings.STREAM_ORPHAN_SECONDS
        )
        if last.status == Message.Status.COMPLETE:
            raise ValidationError("This message already has a reply; use Regenerate instead.", code="answered")
        if last.status == Message.Status.STREAMING and not stale:
            raise ValidationError("A reply is still streaming; stop it first.", code="streaming")
    conversation = _conversation_of(message=message)
    with transaction.atomic():
        claimed_at = turn_claim_take(conversation_id=conversation.pk)  # one turn at a time, as for sends
        # The message's own claim, conditional on the reply being exactly as judged above: a concurrent retry has
        # superseded it, or a live stream has touched its updated_at since (its heartbeat), when
        # nothing is updated. Without a reply, the user message's own row is the claim.
        now = timezone.now()
        if last is not None:
            claim = Message.objects.filter(
                pk=last.pk, superseded=False, status=last.status, updated_at=last.updated_at
            ).update(updated_at=now)
            if claim:
                branch_hide(conversation_id=conversation.pk, start_id=last.pk)
        else:
            claim = Message.objects.filter(pk=message.pk, updated_at=message.updated_at).update(updated_at=now)
            if claim and Message.objects.filter(reply_to=message, superseded=False).exists():
                claim = 0  # a reply appeared after the check above: another attempt got there first
            # Never answered: its send may have died before packing, which indexes a send's message
            # (turn_claim.send_claim_take says when); this turn's packing does not. Idempotent.
            message_index_sync(message_ids=[message.pk])
        if not claim:
            raise ValidationError(
                "This message is already being retried or answered (another tab or a second click?). "
                "Reload the conversation to see the newest reply.",
                code="conflict",
            )
    # The totals as the hide left them: a stopped reply taken off the path is no longer history, and
    # counted still, it made the record's full history (and the saving) larger than what was there.
    conversation.refresh_from_db()
    return _existing_start(user=user, conversation=conversation, user_message=message, claimed_at=claimed_at)


def chat_edit_start(*, user: User, message: Message, content: object, client_key: str = "") -> TurnStart:
    """Edit a user message: a sibling with the new text (same parent) and its reply become the active
    path; the edited message and everything after it stay as a branch. Streams like a send (same
    claim, idempotency key and events)."""
    images = list(message.images.all())  # kept: an edit changes the text, which they let go blank
    text = message_content_validate(content=content, with_images=bool(images))
    if message.role != Message.Role.USER or message.kind != Message.Kind.CHAT:
        raise ValidationError("Only your own messages can be edited.", code="not_user_message")
    client_key = client_key_validate(client_key=client_key)
    if message.superseded:
        # The first edit took the message off the path: the same edit arriving again (a client's retry
        # after a lost answer) is answered as a repeated send is, not as a request to switch branches.
        repeated = Message.objects.filter(conversation_id=message.conversation_id, client_key=client_key)
        if client_key and repeated.exists():
            raise RepeatedSend
        raise ValidationError("This message is not on the branch shown; switch to it first.", code="off_path")
    conversation = _conversation_of(message=message)
    target = target_for(conversation=conversation)
    with transaction.atomic():
        claimed_at = turn_claim_take(conversation_id=conversation.pk, client_key=client_key)
        # Still on the path under the claim: a concurrent edit or switch (another tab) got there first.
        if not Message.objects.filter(pk=message.pk, superseded=False).update(updated_at=timezone.now()):
            raise ValidationError(
                "This message was just edited or its branch switched (another tab?). Reload the conversation.",
                code="conflict",
            )
        branch_hide(conversation_id=conversation.pk, start_id=message.pk)
        conversation.refresh_from_db()
        # The new version is the message now, so it keeps the pin as it keeps the images: left on the
        # version taken off the path, the pin would keep nothing, and the new text would be cut.
        edited = message_append(
            conversation=conversation, role=Message.Role.USER, content=text, token_model=target.model,
            client_key=client_key, parent_id=message.parent_id, extra_tokens=images_tokens(images),
            pinned=message.pinned,
        )
        images = message_images_copy(images=images, message=edited)
    # Its place: the first user message when it edits a root (it becomes the chat's first request).
    place = new_message_place(role=Message.Role.USER, is_first_user=edited.parent_id is None, pinned=edited.pinned)
    accepted = {"user_message": message_serialize(message=edited, place=place, render=False, images=images),
                "title": conversation.title}
    return TurnStart(user=user, conversation=conversation, user_message=edited, target=target, through_id=None,
                     claimed_at=claimed_at, accepted=accepted)


def latest_exchange_check(*, user_message: Message) -> None:
    if user_message.superseded:
        raise ValidationError("This message is not on the branch shown; switch to it first.", code="off_path")
    later = Message.objects.filter(
        conversation_id=user_message.conversation_id,
        role=Message.Role.USER,
        kind=Message.Kind.CHAT,
        superseded=False,  # later messages of other branches do not count: this one ends the path
        id__gt=user_message.pk,
    ).exists()
    if later:
        raise ValidationError("Only the latest exchange can be regenerated or retried.", code="not_latest")
