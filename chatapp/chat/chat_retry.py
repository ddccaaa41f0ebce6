"""Regenerate and Retry: a turn started again from an existing message (see chat_turn).

Both supersede the reply they replace (it stays visible, never sent again) under the conversation's
claim, so two tabs or a double click start one turn, not two.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from chatapp.chat.chat_turn import latest_exchange_check, send_claim, target_for, turn_prepare
from chatapp.chat.context import message_is_live
from chatapp.chat.message_services import live_totals_add
from chatapp.chat.models import Conversation, Message
from chatapp.chat.search_services import message_index_sync
from chatapp.chat.turn_types import ChatTurn

# A placeholder still "streaming" this long after the model timeout belongs to a request that died
# (server restart): Retry may replace it.
_STALE_STREAM_GRACE = timedelta(seconds=60)


def chat_regenerate_start(*, user: User, reply: Message) -> ChatTurn:
    """Answer the same user message again; the old reply stays visible, marked superseded, never sent."""
    if reply.role != Message.Role.ASSISTANT or reply.kind != Message.Kind.CHAT or reply.reply_to_id is None:
        raise ValidationError("Only a model reply can be regenerated.", code="not_a_reply")
    if reply.status == Message.Status.STREAMING:
        raise ValidationError("This reply is still streaming; stop it first.", code="streaming")
    if reply.superseded:
        raise ValidationError("This reply was already replaced.", code="superseded")
    user_message = Message.objects.get(pk=reply.reply_to_id)
    latest_exchange_check(user_message=user_message)
    conversation = Conversation.objects.select_related("llm_config", "owner").get(pk=reply.conversation_id)
    with transaction.atomic():
        send_claim(conversation=conversation, client_key="")  # one turn at a time, as for sends
        # The claim: of two concurrent regenerates (two tabs, a double click) only the one that
        # supersedes the reply goes on; the other would start a second streaming reply.
        claimed = Message.objects.filter(pk=reply.pk, superseded=False, status=reply.status).update(
            superseded=True, updated_at=timezone.now()
        )
        if not claimed:
            raise ValidationError(
                "This reply was just replaced or changed (another tab or a second click?). "
                "Reload the conversation to see the newest reply.",
                code="conflict",
            )
        message_index_sync(message_ids=[reply.pk])  # a superseded reply is no longer recalled
        if message_is_live(kind=reply.kind, status=reply.status, superseded=False):
            live_totals_add(
                conversation_id=conversation.pk,
                messages=-1,
                chars=-reply.char_count,
                tokens=-reply.token_count,
            )
        conversation.refresh_from_db()
        return turn_prepare(
            user=user,
            conversation=conversation,
            user_message=user_message,
            target=target_for(conversation=conversation),
            through_id=user_message.pk,
        )


def _retry_last_reply(*, message: Message) -> Message | None:
    return Message.objects.filter(reply_to=message, superseded=False).order_by("-id").first()


def chat_retry_start(*, user: User, message: Message) -> ChatTurn:
    """Send a user message again after its reply failed or was stopped (or never came).

    The failed reply stays visible (marked superseded: a newer attempt replaced it); being stopped or
    failed it was never part of the context anyway.
    """
    if message.role != Message.Role.USER or message.kind != Message.Kind.CHAT:
        raise ValidationError("Only your own message can be retried.", code="not_user_message")
    latest_exchange_check(user_message=message)
    last = _retry_last_reply(message=message)
    if last is not None:
        stale = last.status == Message.Status.STREAMING and last.updated_at < timezone.now() - (
            timedelta(seconds=settings.LLM_TIMEOUT_SECONDS) + _STALE_STREAM_GRACE
        )
        if last.status == Message.Status.COMPLETE:
            raise ValidationError("This message already has a reply; use Regenerate instead.", code="answered")
        if last.status == Message.Status.STREAMING and not stale:
            raise ValidationError("A reply is still streaming; stop it first.", code="streaming")
    conversation = Conversation.objects.select_related("llm_config", "owner").get(pk=message.conversation_id)
    with transaction.atomic():
        send_claim(conversation=conversation, client_key="")  # one turn at a time, as for sends
        # The claim, conditional on the reply being exactly as judged above: a concurrent retry has
        # superseded it, or a live stream has touched its updated_at since (its heartbeat), when
        # nothing is updated. Without a reply, the user message's own row is the claim.
        now = timezone.now()
        if last is not None:
            claim = Message.objects.filter(
                pk=last.pk, superseded=False, status=last.status, updated_at=last.updated_at
            ).update(superseded=True, updated_at=now)
            message_index_sync(message_ids=[last.pk])
        else:
            claim = Message.objects.filter(pk=message.pk, updated_at=message.updated_at).update(updated_at=now)
            if claim and Message.objects.filter(reply_to=message, superseded=False).exists():
                claim = 0  # a reply appeared after the check above: another attempt got there first
        if not claim:
            raise ValidationError(
                "This message is already being retried or answered (another tab or a second click?). "
                "Reload the conversation to see the newest reply.",
                code="conflict",
            )
        return turn_prepare(
            user=user,
            conversation=conversation,
            user_message=message,
            target=target_for(conversation=conversation),
            through_id=message.pk,
        )
