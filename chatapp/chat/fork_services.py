"""Branch in new chat: a new conversation holding one chat's shown path up to a message of it.

What ChatGPT calls "Branch in new chat" and LibreChat "Fork": a side question or a new direction
taken from a point of a long chat without adding to it. The new chat holds the messages of the path
the chat shows, up to and including that message, as they stood: texts, dates (recall quotes them),
pins, the summaries of those messages, the chat's system prompt and model. What came later, the other
versions and the original's records stay where they are; nothing of the original changes.

It is stored as an import of our own export is (the export's message values, read by the import's
reader for our format and written by import_writing): token counts, running totals and the search
index come out as they do for any chat brought in, with the checks that guard an import.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from chatapp.chat.conversation_export import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    MESSAGE_EXPORT_FIELDS,
    message_export_values,
)
from chatapp.chat.import_writing import TITLE_MAX_CHARS, ModelChoice, conversation_import
from chatapp.chat.imports import ConversationError, longchat
from chatapp.chat.models import Conversation, Message
from chatapp.chat.selectors import message_get

BRANCH_TITLE_SUFFIX = " (branch)"
# Written in the request, as an import writes one chat (5,000 messages: about a second on SQLite, whose
# other writers wait meanwhile, as on PostgreSQL; bench/import_speed.py --fork): a longer path would
# hold the request, and SQLite's writers, for longer than a click should.
MAX_FORK_MESSAGES = 5_000


def conversation_fork(*, owner: User, message_id: int) -> Conversation:
    """A new chat of `owner` holding the shown path of `message_id`'s chat up to that message.

    Http404 for a message that is not theirs; ValidationError for one the chat no longer shows (another
    version replaced it), a summary, or a reply still being written."""
    message = message_get(owner=owner, pk=message_id)
    if message.kind != Message.Kind.CHAT:
        raise ValidationError("A new chat branches from a message of the chat, not from a summary.")
    if message.superseded:
        raise ValidationError(
            "That message is on a version the chat no longer shows: switch to it first, then branch from it.",
            code="off_path",
        )
    if message.status == Message.Status.STREAMING:
        raise ValidationError("That reply is still being written: branch from it once it has ended.")
    source = message.conversation
    # Ids grow along a path (a message is written after the one it answers), so the shown path up to
    # the message is every message still on it with an id not above the message's; a summary written
    # since of messages up to it comes too (what it says holds there, and the new chat need not
    # summarize them again).
    rows = (
        Message.objects.filter(
            Q(id__lte=message.pk) | Q(kind=Message.Kind.SUMMARY, covers_through_id__lte=message.pk),
            conversation_id=source.pk, superseded=False,
        )
        .order_by("id")
        .values(*MESSAGE_EXPORT_FIELDS)
    )
    if rows.count() > MAX_FORK_MESSAGES:
        raise ValidationError(
            f"The chat holds more than {MAX_FORK_MESSAGES:,} messages up to there: too many to copy into a new "
            "chat at once. Branch from a version (Edit) in this chat instead."
        )
    now = timezone.now()
    title = source.title[: TITLE_MAX_CHARS - len(BRANCH_TITLE_SUFFIX)] + BRANCH_TITLE_SUFFIX
    config = source.llm_config
    document = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "conversation": {
            "title": title,
            "system_prompt": source.system_prompt,
            "created_at": now.isoformat(),
            "updated_at": now.isoformat(),
            "offline": source.offline,
            "llm_config": {"name": config.name, "model": config.model} if config is not None else None,
        },
        "messages": [message_export_values(row=row) for row in rows],
    }
    try:
        record = longchat.conversation_parse(document, index=0)
        with transaction.atomic():
            fork = conversation_import(owner=owner, record=record, index=0, models=ModelChoice(owner=owner))
            # The chat's own model, as it is set there: the import matches a config by name and model,
            # and gives a chat that follows the default (no config of its own) the default itself.
            Conversation.objects.filter(pk=fork.pk).update(llm_config=source.llm_config_id, offline=source.offline)
    except ConversationError as exc:
        raise ValidationError(f"This chat cannot be copied as it is: {exc}") from None
    fork.refresh_from_db()
    return fork
