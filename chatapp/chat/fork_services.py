"""Branch in new chat: a new conversation holding one chat's shown path up to a message of it.

What ChatGPT calls "Branch in new chat" and LibreChat "Fork": a side question or a new direction
taken from a point of a long chat without adding to it. The new chat holds the messages of the path
the chat shows, up to and including that message, as they stood: texts, dates (recall quotes them),
pins, the summaries of those messages, the chat's system prompt, model and folder. What came later,
the other versions and the original's records stay where they are; nothing of the original changes.

It is stored as an import of our own export is (the export's message values, read by the import's
reader for our format and written by import_writing): token counts, running totals and the search
index come out as they do for any chat brought in, with the checks that guard an import. A path longer
than a request should write (MAX_FORK_MESSAGES) goes to the import worker as that export, in an import
job marked as a branch (import_services): the client follows the job as it follows an upload.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from chatapp.chat.conversation_export import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    MESSAGE_EXPORT_FIELDS,
    message_export_json,
    message_export_values,
)
from chatapp.chat.image_export import page_images_add, rows_with_images
from chatapp.chat.image_models import MessageImage
from chatapp.chat.import_models import ImportJob
from chatapp.chat.import_services import (
    ImportPayload,
    ImportTooLarge,
    branch_original_keep,
    import_backlog_check,
    import_job_store,
)
from chatapp.chat.import_writing import TITLE_MAX_CHARS, ModelChoice, conversation_import
from chatapp.chat.imports import ConversationError, longchat
from chatapp.chat.models import Conversation, Message
from chatapp.chat.selectors import message_get
from chatapp.chat.size_limits import TooLarge

BRANCH_TITLE_SUFFIX = " (branch)"
# Written in the request up to this many messages, as an import writes one chat (5,000 messages: about a
# second on SQLite, whose other writers wait meanwhile, as on PostgreSQL; bench/import_speed.py --fork). A
# longer path would hold the request, and SQLite's writers, for longer than a click should: it is stored
# as an import job of the branch (ForkQueued) and written by the import worker, as an upload is.
MAX_FORK_MESSAGES = 5_000
# Image bytes a path may hold to be written in the request: the request holds them all at once, four
# times over (the bytes, their base64, the export's text, the rows written), where the job reads them a
# run at a time (image_export) and refuses an export past IMPORT_MAX_BYTES. 120 MB of photos cost the
# request 430 MB, and a path of photos the job refuses made the request hold gigabytes.
MAX_FORK_IMAGE_BYTES = 32_000_000
# Rows read per query while a long path is written into the job's payload.
_CHUNK_ROWS = 500


class ForkTooLarge(TooLarge):
    """A path past MAX_FORK_MESSAGES whose export is larger than settings.IMPORT_MAX_BYTES (bytes)."""

    @staticmethod
    def describe(*, limit: int, size: int) -> str:
        return (f"The chat up to there is more than {size / 1e6:,.1f} MB as an export; the largest branch written "
                f"in the background is {limit / 1e6:,.1f} MB (the import limit). Branch from an earlier message, "
                "or from a version (Edit) in this chat.")


@dataclass(frozen=True, slots=True)
class ForkQueued:
    """A path past MAX_FORK_MESSAGES: stored as an import job (Kind.BRANCH) the worker writes the new chat from."""

    job: ImportJob
    messages: int


def conversation_fork(*, owner: User, message_id: int) -> Conversation | ForkQueued:
    """A new chat of `owner` holding the shown path of `message_id`'s chat up to that message; past
    MAX_FORK_MESSAGES messages, the queued job that writes it.

    Http404 for a message that is not theirs; ValidationError for one the chat no longer shows (another
    version replaced it), a summary, or a reply still being written; past the limit, ForkTooLarge and
    ImportBacklogFull as for an upload."""
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
    count = rows.count()
    if count > MAX_FORK_MESSAGES or _image_bytes(rows=rows) > MAX_FORK_IMAGE_BYTES:
        return ForkQueued(job=_fork_job_create(owner=owner, source=source, rows=rows), messages=count)
    messages = [message_export_values(row=row) for row in page_images_add(list(rows))]  # images: image_export
    document = {**_document_head(source=source), "messages": messages}
    try:
        record = longchat.conversation_parse(document, index=0)
        with transaction.atomic():
            fork = conversation_import(owner=owner, record=record, index=0, models=ModelChoice(owner=owner))
            branch_original_keep(conversation_id=fork.pk, source_id=source.pk)
    except ConversationError as exc:
        raise ValidationError(f"This chat cannot be copied as it is: {exc}") from None
    fork.refresh_from_db()
    return fork


def _image_bytes(*, rows: QuerySet[Message, dict[str, Any]]) -> int:
    """The bytes of the images the path's messages carry (their sizes summed, none read)."""
    held = MessageImage.objects.filter(message_id__in=rows.values("id")).aggregate(total=Sum("byte_count"))
    return held["total"] or 0


def _document_head(*, source: Conversation) -> dict[str, Any]:
    """Our export's document for the branch of `source`, without its messages."""
    now = timezone.now()
    title = source.title[: TITLE_MAX_CHARS - len(BRANCH_TITLE_SUFFIX)] + BRANCH_TITLE_SUFFIX
    config = source.llm_config
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "conversation": {
            "title": title,
            "system_prompt": source.system_prompt,
            "created_at": now.isoformat(),
            "updated_at": now.isoformat(),
            "offline": source.offline,
            "llm_config": {"name": config.name, "model": config.model} if config is not None else None,
            "folder": source.folder.name if source.folder is not None else None,
        },
    }


def _fork_job_create(*, owner: User, source: Conversation, rows: QuerySet[Message, dict[str, Any]]) -> ImportJob:
    """The branch's export, compressed as its messages are read (a page at a time), stored as a queued
    import job the worker writes the new chat from."""
    then = "branch from this message again"
    import_backlog_check(owner=owner, then=then)  # before the path is read: it would only be dropped
    head = _document_head(source=source)
    payload = ImportPayload()
    try:
        # The head with its closing brace replaced by the opening of the messages array, as the export writes it.
        payload.write((json.dumps(head, ensure_ascii=False)[:-1] + ', "messages": [').encode())
        separator = "\n"
        for row, image_bytes in rows_with_images(rows.iterator(chunk_size=_CHUNK_ROWS), size=_CHUNK_ROWS):
            payload.write((separator + message_export_json(row=row, image_bytes=image_bytes)).encode())
            separator = ",\n"
        payload.write(b"\n]}")
    except ImportTooLarge as exc:
        raise ForkTooLarge(limit=exc.limit, size=exc.size) from None
    title = head["conversation"]["title"]
    return import_job_store(owner=owner, payload=payload, filename=title, then=then, source_conversation_id=source.pk)
