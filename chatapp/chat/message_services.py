"""Writes on messages: store one (counts, index, live totals), pin, stop; and the checks and
shapes around them (validation, the title a first message gives its chat, the stream's message)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.http import Http404
from django.utils import timezone

import optimizer
from chatapp.chat.branch_selectors import SiblingPlace, message_sibling_places, path_tail_id
from chatapp.chat.context import conversation_config, is_offline_reply, message_is_live
from chatapp.chat.image_models import MessageImage
from chatapp.chat.image_services import message_images_shape
from chatapp.chat.layout import Place
from chatapp.chat.models import Conversation, Message
from chatapp.chat.rendering import markdown_render
from chatapp.chat.reply_stream import INTERRUPTED_WORDS, stop_flag
from chatapp.chat.search_services import message_index_add, message_index_sync
from chatapp.chat.size_limits import TooLarge
from chatapp.chat.textsafe import cluster_edge, text_blank, text_problem
from chatapp.providers import llm

TITLE_MAX_CHARS = 60


class MessageTooLarge(TooLarge):
    """The message is longer than settings.MAX_MESSAGE_CHARS (`limit` and `size` in characters); nothing
    was stored."""

    @staticmethod
    def describe(*, limit: int, size: int) -> str:
        return (
            f"Your message is {size:,} characters long; the limit is {limit:,} characters. "
            "Shorten it or split it into several messages."
        )


def live_totals_add(
    *, conversation_id: int, messages: int, chars: int, tokens: int, offline: tuple[int, int, int] = (0, 0, 0)
) -> None:
    """Adjust the conversation's running totals over sendable messages (F(): concurrent turns add up);
    `offline`: (messages, chars, tokens) of those that are the offline demo model's replies."""
    Conversation.objects.filter(pk=conversation_id).update(
        live_message_count=F("live_message_count") + messages,
        live_char_count=F("live_char_count") + chars,
        live_token_count=F("live_token_count") + tokens,
        offline_reply_count=F("offline_reply_count") + offline[0],
        offline_reply_chars=F("offline_reply_chars") + offline[1],
        offline_reply_tokens=F("offline_reply_tokens") + offline[2],
        updated_at=timezone.now(),
    )


def message_append(
    *,
    conversation: Conversation,
    role: str,
    content: str,
    kind: str = Message.Kind.CHAT,
    token_model: str | None = None,
    extra_tokens: int = 0,
    **fields: Any,
) -> Message:
    """Store a message with its token and character counts and keep the live totals in step.

    `token_model` is the model to count for (the caller usually has the target already); by default
    the conversation's config model, else the offline model. A chat message follows the tail of the
    active path unless `parent_id` says otherwise (an edit: the edited message's parent).
    `extra_tokens`: what the message carries besides its text (an edit's images: image_services).
    """
    if kind == Message.Kind.CHAT and "parent_id" not in fields:
        fields["parent_id"] = path_tail_id(conversation_id=conversation.pk)
    if token_model is None:
        token_model = llm.llm_target_for(config=conversation_config(conversation=conversation)).model
    tokens = optimizer.count_message({"role": role, "content": content}, model=token_model) + extra_tokens
    with transaction.atomic(savepoint=False):  # nested in a turn: no savepoint round trips
        message = Message.objects.create(
            conversation=conversation,
            role=role,
            kind=kind,
            content=content,
            token_count=tokens,
            char_count=len(content),
            **fields,
        )
        message_index_add(message=message)  # recall and search find it from this commit on
        if message_is_live(kind=message.kind, status=message.status, superseded=message.superseded):
            offline = is_offline_reply(role=role, model=message.model)
            live_totals_add(conversation_id=conversation.pk, messages=1, chars=len(content), tokens=tokens,
                            offline=(1, len(content), tokens) if offline else (0, 0, 0))
            # The caller's instance follows along (the database row was updated with F() above).
            conversation.live_message_count += 1
            conversation.live_char_count += len(content)
            conversation.live_token_count += tokens
            if offline:
                conversation.offline_reply_count += 1
                conversation.offline_reply_chars += len(content)
                conversation.offline_reply_tokens += tokens
    return message


def message_pin_set(*, message: Message, pinned: bool) -> Message:
    """Pin or unpin a chat message: pinned messages are always sent, whatever the window."""
    if message.kind != Message.Kind.CHAT:
        raise ValidationError({"pinned": "Only chat messages can be pinned."})
    if message.pinned != pinned:
        rows = Message.objects.filter(pk=message.pk)
        # Pinned is "always sent": a message another version replaced (a tab still showing it) is sent
        # by nothing. Unpinning sends nothing more, so it is taken wherever the message is.
        if not (rows.filter(superseded=False) if pinned else rows).update(pinned=pinned, updated_at=timezone.now()):
            if rows.exists():
                raise ValidationError(
                    "That message is on a version the chat no longer shows: switch to it first.", code="off_path"
                )
            # Deleted with its chat (another tab) since the request found it: the answer to a message
            # that never was, not a 200 saying it is pinned.
            raise Http404("No Message matches the given query.")
        message.pinned = pinned
    return message


def message_stop(*, message: Message) -> None:
    """Mark a streaming reply stopped; its stream loop sees the flag and keeps the partial text. A
    reply the orphan sweep took for dead may still be streaming (its heartbeat had stalled): the stop
    wins there too, rather than the reply being stored complete when it ends (reply_store).

    A stopped reply is live (context.live_chat_q): it is counted here, with the text checkpointed so
    far, since the stream loop that would store the rest may be gone; reply_store then adds what
    its final text changes."""
    streaming = Q(status=Message.Status.STREAMING) | Q(status=Message.Status.ERROR, error=INTERRUPTED_WORDS)
    with transaction.atomic():
        stopped = Message.objects.filter(streaming, pk=message.pk).update(
            status=Message.Status.STOPPED, updated_at=timezone.now()
        )
        if stopped:
            _stopped_reply_count(message_id=message.pk)
            # The index follows the status even if the stream loop that would store the partial text
            # (and sync again) is gone.
            message_index_sync(message_ids=[message.pk])
            # A stream on this process sees it at its next chunk, with no query.
            transaction.on_commit(lambda: stop_flag(message.pk))


def _stopped_reply_count(*, message_id: int) -> None:
    """Count a reply just stopped into the live totals (if it is on the path shown), with its text as
    checkpointed, its token count written beside it: what reply_store compares its final text with."""
    row = Message.objects.filter(pk=message_id).values("conversation_id", "content", "model", "superseded").first()
    if row is None:
        return
    tokens = optimizer.count_message({"role": Message.Role.ASSISTANT, "content": row["content"]}, model=row["model"])
    chars = len(row["content"])
    Message.objects.filter(pk=message_id).update(token_count=tokens, char_count=chars)
    if not row["superseded"]:
        offline = is_offline_reply(role=Message.Role.ASSISTANT, model=row["model"])
        live_totals_add(conversation_id=row["conversation_id"], messages=1, chars=chars, tokens=tokens,
                        offline=(1, chars, tokens) if offline else (0, 0, 0))


def message_content_validate(*, content: Any, with_images: bool = False) -> str:
    """The message text, or ValidationError (not text, empty) / MessageTooLarge. A message that carries
    an image (`with_images`) may have no text, as in ChatGPT or Open WebUI: its blank text is stored as ""."""
    if not isinstance(content, str):
        raise ValidationError({"content": "The message must be text."}, code="invalid")
    if text_blank(content):  # white space, or characters that do not show (a zero-width space)
        if with_images:
            return ""
        raise ValidationError({"content": "Type a message before sending."}, code="blank")
    limit = settings.MAX_MESSAGE_CHARS
    if len(content) > limit:
        raise MessageTooLarge(limit=limit, size=len(content))
    problem = text_problem(content)
    if problem is not None:
        raise ValidationError({"content": problem}, code="invalid")
    return content


CLIENT_KEY_MAX_CHARS = 64  # Message.client_key's column


def client_key_validate(*, client_key: Any) -> str:
    """An idempotency key as stored ("" for none), or ValidationError: text of at most 64 characters
    that the database can hold (a NUL or a lone surrogate would fail the insert, a 500 instead of a 400)."""
    if client_key is None or client_key == "":
        return ""
    if not isinstance(client_key, str):
        raise ValidationError({"client_key": "The client key must be text."}, code="invalid")
    if len(client_key) > CLIENT_KEY_MAX_CHARS:
        raise ValidationError({"client_key": f"At most {CLIENT_KEY_MAX_CHARS} characters."}, code="invalid")
    problem = text_problem(client_key, what="The client key")
    if problem is not None:
        raise ValidationError({"client_key": problem}, code="invalid")
    return client_key


# Markdown a title shows as plain text: block markers at the start of the line, then links and
# images (their text stays), code spans, and emphasis in pairs. `_` emphasis needs non-word
# characters around it, as in CommonMark, so snake_case names keep their underscores.
_TITLE_BLOCK_MARKERS = re.compile(r"^(?:#{1,6}\s+|>\s*|[-*+]\s+|\d{1,3}[.)]\s+)+")


# A code fence's opening or closing line (```python, ~~~): no title; the code inside it may be one.
_TITLE_FENCE = re.compile(r"^\s{0,3}(?:`{3,}|~{3,})")


_TITLE_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


_TITLE_CODE = re.compile(r"(`+)(.+?)\1")


_TITLE_EMPHASIS = (
    re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"),
    re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)"),
    re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"),
    re.compile(r"\*(?=\S)(.+?)(?<=\S)\*"),
    re.compile(r"(?<!\w)_(?=\S)(.+?)(?<=\S)_(?!\w)"),
)


def _title_plain(line: str) -> str:
    line = _TITLE_BLOCK_MARKERS.sub("", line)
    line = _TITLE_LINK.sub(r"\1", line)
    line = _TITLE_CODE.sub(r"\2", line)
    for pattern in _TITLE_EMPHASIS:
        line = pattern.sub(r"\1", line)
    return line.strip()


def title_from_text(*, text: str, image_names: Sequence[str] = ()) -> str:
    """A short title from the first user message: its first line as plain text (a code fence's marker
    line passed by), cut at a word boundary. An image alone (`image_names`: the message's images'; a
    pasted one has none) is named by its file until the model names the chat (title_services)."""
    line = next((ln for ln in text.strip().splitlines() if not text_blank(ln) and not _TITLE_FENCE.match(ln)), "")
    if not line and image_names:  # a file's name as it is, no Markdown read in it
        name = " ".join(next((n for n in image_names if n.strip()), "").split())
        return title_cut(f"Image: {name}") if name else "Image"
    return title_cut(_title_plain(re.sub(r"\s+", " ", line).strip())) or "New chat"


def title_cut(line: str) -> str:
    """`line` cut to TITLE_MAX_CHARS at a word boundary, marked with an ellipsis when cut."""
    if len(line) <= TITLE_MAX_CHARS:
        return line
    cut = line[: cluster_edge(line, TITLE_MAX_CHARS - 1, forward=False)]
    if " " in cut[TITLE_MAX_CHARS // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,.;:-") + "…"


def _iso(value: datetime | None) -> str | None:
    """As DRF writes a datetime: ISO 8601, UTC as Z."""
    if value is None:
        return None
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def message_serialize(
    *, message: Message, place: Place | None, render: bool = True, siblings: SiblingPlace | None = None,
    images: Sequence[MessageImage] | None = None,
) -> dict[str, Any]:
    """The one shape of a message: the REST API's (api.serializers.MessageOutputSerializer, which
    documents it) and the stream's `start`, `done` and `error` events. `place` as message_place_get
    gives it; `html` is the sanitized rendering the timeline shows, or None with `render=False` (the
    user's message in the start event: rendering a long paste would delay the reply's first byte).
    `siblings` (message_sibling_places) is read here, one query, when the caller has not read a page's;
    so are a user message's `images` (image_services.message_images_shape)."""
    if siblings is None:
        siblings = message_sibling_places(messages=[message]).get(message.pk, (1, 1))
    return {
        "id": message.pk,
        "conversation": message.conversation_id,
        "role": message.role,
        "kind": message.kind,
        "content": message.content,
        "images": message_images_shape(message=message, images=images),
        "reasoning": message.reasoning or "",
        "finish_reason": message.finish_reason,
        "html": markdown_render(message.content) if render else None,
        "token_count": message.token_count,
        "char_count": message.char_count,
        "pinned": message.pinned,
        "place": place,
        "status": message.status,
        "superseded": message.superseded,
        "reply_to": message.reply_to_id,
        "parent": message.parent_id,
        "sibling_index": siblings[0],
        "sibling_count": siblings[1],
        "model": message.model,
        "prompt_tokens": message.prompt_tokens,
        "completion_tokens": message.completion_tokens,
        "latency_ms": message.latency_ms,
        "error": message.error,
        "covers_from_id": message.covers_from_id,
        "covers_through_id": message.covers_through_id,
        "covered_message_count": message.covered_message_count,
        "extractive": message.extractive,
        "discarded": message.discarded,
        "edited": message.edited,
        "created_at": _iso(message.created_at),
        "updated_at": _iso(message.updated_at),
    }
