"""A conversation as a download: our versioned JSON (the faithful copy) or Markdown (for reading).

Both are async iterators of text chunks, so under ASGI the download streams from the event loop:
Django's ASGI handler reads a synchronous iterator to the end, into memory, before sending a byte.
Messages are read by keyset pages on the (conversation, id) index, `EXPORT_CHUNK_ROWS` at a time,
each page in its own short database call that gives the connection back (dbconn.db_short; a
server-side cursor would hold one for the whole download): memory stays at one page whatever the
history's length, its images read without their bytes, which the JSON reads a run at a time (image_export).

What is exported is fixed when the export starts: every message up to the newest at that moment
(a reply still streaming then is exported with status "streaming" and its text so far). A chat
deleted before its last page was read fails the download (ExportGoneError) instead.

JSON (`{"format": "longchat.conversation", "version": 1, ...}`): the conversation (title, dates, the
config's name and model, never its key or address; the preference its latest turn used, the window
start, its folder's name or null) and every stored message in id order with every field that carries
meaning (role, kind, status, content, `images`, `reasoning`, dates, pinned, superseded, the message a
reply answers, usage, cost, error, a summary's range and edit / discard state), but `client_key` (one
client's idempotency key) and `char_count`. Ids are this server's: an import maps them.

Markdown: a title (and "Folder: name" below it), then each message under `### 12 · User — 2024-03-09
14:02 UTC`, numbered as the chat numbers them (chat messages only). Nothing stored is hidden but
discarded summaries (the JSON keeps them): a replaced, failed, stopped or unfinished reply stays, marked
in its heading, so the numbers match the chat's and the summaries' ranges. Summaries are blockquotes
headed "Summary of messages n\u2013m"; a reply's thinking, a blockquote headed "Thinking" above it.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone
from markdown_it import MarkdownIt

from chatapp.chat.dbconn import db_short
from chatapp.chat.image_export import image_runs, image_values, images_bytes, images_markdown, page_images_add
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.chat.textsafe import fence_left_open
from chatapp.providers.models import LLMConfig

EXPORT_FORMAT = "longchat.conversation"
EXPORT_VERSION = 1
EXPORT_CHUNK_ROWS = 500


@dataclass(frozen=True)
class ExportFormat:
    media_type: str
    extension: str


EXPORT_FORMATS: dict[str, ExportFormat] = {
    "json": ExportFormat(media_type="application/json", extension="json"),
    "markdown": ExportFormat(media_type="text/markdown; charset=utf-8", extension="md"),
}

MESSAGE_EXPORT_FIELDS: tuple[str, ...] = (
    "id", "role", "kind", "status", "content", "created_at", "updated_at", "pinned", "superseded",
    "reply_to_id", "model", "token_count", "prompt_tokens", "completion_tokens", "latency_ms", "cost_usd",
    "error", "covers_from_id", "covers_through_id", "covered_message_count", "source_chars", "extractive",
    "discarded", "edited", "edited_from_id", "parent_id", "off_path_by", "skipped_pin_ids", "reasoning",
    "finish_reason",
)

_ROLE_NAMES = {Message.Role.USER: "User", Message.Role.ASSISTANT: "Assistant", Message.Role.SYSTEM: "System"}
OUTPUT_LIMIT_MARK = "cut at the output limit"
_STATUS_MARKS = {
    Message.Status.STOPPED: "stopped",
    Message.Status.ERROR: "failed",
    Message.Status.STREAMING: "still being written",
}


def conversation_export_chunks(
    *, conversation: Conversation, fmt: str, chunk_rows: int = EXPORT_CHUNK_ROWS
) -> AsyncIterator[str]:
    """The export of `conversation` in `fmt` ("json" or "markdown"), as text chunks (one per page of
    messages). An unknown format raises ValueError here, before anything is read."""
    if fmt == "json":
        return _json_chunks(conversation=conversation, chunk_rows=chunk_rows)
    if fmt == "markdown":
        return _markdown_chunks(conversation=conversation, chunk_rows=chunk_rows)
    raise ValueError(f"Unknown export format {fmt!r}: use one of {', '.join(EXPORT_FORMATS)}.")


# --- reads ---------------------------------------------------------------------------------------------


class ExportGoneError(Exception):
    """The conversation was deleted (another tab) before or while its export was read: what is left to read
    is gone, and the download must fail rather than end as a whole document holding part of it (the
    account's export leaves out a chat deleted before its turn came)."""


@dataclass(frozen=True)
class _Head:
    conversation: dict[str, Any]
    through_id: int  # the newest message when the export started (0: none)
    config_label: str
    summary_covers: list[int]  # ids whose chat numbers the Markdown's summary headers need


def _conversation_head(*, conversation: Conversation) -> _Head:
    # Read again: the caller's row may be older than the download (a page of the account's chats).
    fresh = Conversation.objects.select_related("folder").filter(pk=conversation.pk).first()
    if fresh is None:
        raise ExportGoneError(conversation.pk)
    conversation = fresh
    config: LLMConfig | None = None
    if conversation.llm_config_id is not None:
        config = LLMConfig.objects.filter(pk=conversation.llm_config_id).first()
    preference = (
        OptimizationRecord.objects.filter(conversation_id=conversation.pk)
        .order_by("-id").values_list("preference", flat=True).first()
    )
    through_id = (
        Message.objects.filter(conversation_id=conversation.pk).order_by("-id").values_list("id", flat=True).first()
    ) or 0
    covers: set[int] = set()
    spans = Message.objects.filter(
        conversation_id=conversation.pk, kind=Message.Kind.SUMMARY, discarded=False, superseded=False,
        id__lte=through_id,
    ).values_list("covers_from_id", "covers_through_id")
    for span in spans:
        covers.update(i for i in span if i is not None)
    config_out = None
    if config is not None:
        # Name and model only: the key is secret and the address may carry credentials or a private host.
        config_out = {
            "name": config.name, "model": config.model, "context_window": config.context_window,
            "max_output_tokens": config.max_output_tokens, "temperature": config.temperature,
        }
    if conversation.offline:
        label = "the offline demo model"
    elif config is not None:
        label = f"{config.name} ({config.model})"
    else:
        label = "the owner's default model"
    return _Head(
        conversation={
            "id": conversation.pk,
            "title": conversation.title,
            "title_is_custom": conversation.title_is_custom,
            # The chat's own system prompt (the owner's custom instructions are settings, not the chat).
            "system_prompt": conversation.system_prompt,
            "created_at": conversation.created_at.isoformat(),
            "updated_at": conversation.updated_at.isoformat(),
            "offline": conversation.offline,
            "pinned_at": conversation.pinned_at.isoformat() if conversation.pinned_at else None,
            "archived_at": conversation.archived_at.isoformat() if conversation.archived_at else None,
            "llm_config": config_out,
            "preference": preference,
            "window_start_id": conversation.window_start_id,
            # By name: ids are this server's, and the import files the chat in its owner's folder of that name.
            "folder": conversation.folder.name if conversation.folder is not None else None,
        },
        through_id=through_id,
        config_label=label,
        summary_covers=sorted(covers),
    )


def _message_page(*, conversation_id: int, after_id: int, through_id: int, limit: int) -> list[dict[str, Any]]:
    return page_images_add(list(  # and the user messages' images, without their bytes: image_export
        Message.objects.filter(conversation_id=conversation_id, id__gt=after_id, id__lte=through_id)
        .order_by("id")
        .values(*MESSAGE_EXPORT_FIELDS)[:limit]
    ), with_bytes=False)


_read_head = db_short(_conversation_head)
_read_page = db_short(_message_page)
_read_image_bytes = db_short(images_bytes)


async def _message_pages(*, conversation_id: int, through_id: int, chunk_rows: int) -> AsyncIterator[list[dict]]:
    after_id = 0
    while after_id < through_id:
        page = await _read_page(
            conversation_id=conversation_id, after_id=after_id, through_id=through_id, limit=chunk_rows
        )
        if not page:
            # Messages up to `through_id` existed when the export started and are deleted only with
            # their conversation: closing the document here would hand over a truncated copy as whole.
            raise ExportGoneError(conversation_id)
        yield page
        after_id = page[-1]["id"]


# --- JSON ----------------------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    # Full precision both ways: DjangoJSONEncoder would cut microseconds, a float would round a cost.
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def message_export_values(*, row: dict[str, Any], image_bytes: dict[int, bytes] | None = None) -> dict[str, Any]:
    """One message of our JSON export, from its MESSAGE_EXPORT_FIELDS values (also what a branch into
    a new chat hands the import's reader: fork_services); `image_bytes` where its images were read without."""
    out = {key: _json_value(row[key]) for key in MESSAGE_EXPORT_FIELDS}
    out["images"] = [image_values(image, data=None if image_bytes is None else image_bytes[image.pk])
                     for image in row.get("images", ())]
    if row["kind"] == Message.Kind.SUMMARY and out["skipped_pin_ids"] is None:
        # Stored as null when a summary passed over no pin; a file's null says nothing (the import
        # then guesses, as for other apps' files), so the export says "none".
        out["skipped_pin_ids"] = []
    return out


def message_export_json(*, row: dict[str, Any], image_bytes: dict[int, bytes] | None = None) -> str:
    return json.dumps(message_export_values(row=row, image_bytes=image_bytes), ensure_ascii=False)


async def _json_chunks(*, conversation: Conversation, chunk_rows: int) -> AsyncIterator[str]:
    head = await _read_head(conversation=conversation)
    document = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": timezone.now().isoformat(),
        "conversation": head.conversation,
    }
    # The document's head with its closing brace replaced by the opening of the messages array.
    yield json.dumps(document, ensure_ascii=False)[:-1] + ', "messages": ['
    separator = "\n"
    async for page in _message_pages(
        conversation_id=conversation.pk, through_id=head.through_id, chunk_rows=chunk_rows
    ):
        for run in image_runs(page):  # a run's image bytes at a time (image_export), never a page's
            found = await _read_image_bytes(rows=run) if any(row["images"] for row in run) else {}
            if len(found) < sum(len(row["images"]) for row in run):  # deleted with the chat since the page was read
                raise ExportGoneError(conversation.pk)
            yield separator + ",\n".join(message_export_json(row=row, image_bytes=found) for row in run)
            separator = ",\n"
    yield "\n]}\n"


# --- Markdown ------------------------------------------------------------------------------------------


class _ChatNumbers:
    """Chat numbers (1-based among chat messages, as selectors.message_numbers counts) of the ids a
    summary header names, found while the messages go by in id order: no id list is kept, and a
    summary always comes after the messages it covers."""

    def __init__(self, *, wanted: list[int]) -> None:
        self._wanted = wanted
        self._next = 0
        self.chat_seen = 0
        self.numbers: dict[int, int] = {}

    def _settle(self, *, below: int, inclusive: bool) -> None:
        wanted = self._wanted
        while self._next < len(wanted) and (wanted[self._next] < below or (inclusive and wanted[self._next] == below)):
            self.numbers[wanted[self._next]] = self.chat_seen
            self._next += 1

    def observe(self, *, message_id: int, is_chat: bool) -> None:
        self._settle(below=message_id, inclusive=False)
        if is_chat:
            self.chat_seen += 1
        self._settle(below=message_id, inclusive=True)


def _utc_minute(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _one_line(text: str) -> str:
    return " ".join(text.split())


_COMMONMARK = MarkdownIt("commonmark")
# A line's start as CommonMark reads it: after \n, \r\n or a lone \r (re's MULTILINE ^ knows only \n).
_LINE_START = r"(?:^|(?<=\r))"
# A line that may open an HTML block (at most three spaces in), which runs on past a blank line.
_HTML_START = re.compile(_LINE_START + r" {0,3}<", re.MULTILINE)
# An indented fence line: whether it opens or closes depends on indentation rules (at most three spaces
# in, counted from a list item's content; a tab is four columns) that `_fences_closed` does not follow.
_INDENTED_FENCE = re.compile(_LINE_START + r"[ \t]+(?:`{3,}|~{3,})", re.MULTILINE)
_PROBE = "\n\n### end\n"


def _fences_closed(text: str) -> str:
    """`text` with a code fence it leaves open closed, at the opener's indentation (in a list item
    too): one unclosed ``` would swallow the rest of the document into a code block."""
    left_open = fence_left_open(text)
    return f"{text}\n{left_open[0]}{left_open[1]}" if left_open else text


def _markdown_text(text: str) -> str:
    """A message's text for the Markdown export: its Markdown, fences closed; shown as written (in a
    fence of its own) when it would still run into the next message's heading, as an HTML block left
    open does (a user's "<!-- is this a comment?"), or a fence the scan misread (an indented one)."""
    closed = _fences_closed(text)
    if _HTML_START.search(closed) is None and _INDENTED_FENCE.search(closed) is None:
        return closed
    tokens = _COMMONMARK.parse(closed + _PROBE)
    if len(tokens) >= 3 and tokens[-3].type == "heading_open" and tokens[-2].content == "end":
        return closed
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{fence}text\n{text}\n{fence}"


def _off_path_mark(row: dict[str, Any]) -> str:
    # The tags say where a hidden branch starts, not how it was left (an edit, a regenerate, a switch
    # to another version, an import): say only what is true of each.
    if row["off_path_by"] not in (None, row["id"]):
        return "on another branch"
    return "another version (not on the active path)"


def _markdown_chat(*, row: dict[str, Any], number: int | None) -> str:
    """A chat message; off the active path it has no number (the app numbers the path) and says why."""
    shown = "—" if number is None else str(number)
    heading = f"### {shown} · {_ROLE_NAMES.get(row['role'], row['role'])} — {_utc_minute(row['created_at'])}"
    marks = []
    if row["model"] and row["role"] == Message.Role.ASSISTANT:
        marks.append(row["model"])
    if row["pinned"]:
        marks.append("pinned")
    if row["superseded"]:
        marks.append(_off_path_mark(row))
    if row["status"] in _STATUS_MARKS:
        marks.append(_STATUS_MARKS[row["status"]])
    elif row["status"] == Message.Status.COMPLETE and row["finish_reason"] == "length":
        marks.append(OUTPUT_LIMIT_MARK)
    if marks:
        heading += " · " + ", ".join(_one_line(m) for m in marks)
    parts = [heading]
    thinking = _quoted_block("Thinking", _fences_closed(row["reasoning"] or ""))
    if thinking:
        parts.append(thinking.rstrip("\n"))
    if row["content"] or not row.get("images"):  # an image sent alone is its image line
        parts.append(_markdown_text(row["content"]) if row["content"] else "*(no text)*")
    parts += [images_markdown(row["images"])] if row.get("images") else []
    if row["status"] == Message.Status.ERROR and row["error"]:
        parts.append(f"*Error: {_one_line(row['error'])}*")
    return "\n\n".join(parts) + "\n\n"


def _markdown_summary(*, row: dict[str, Any], numbers: dict[int, int]) -> str:
    first, last = numbers.get(row["covers_from_id"]), numbers.get(row["covers_through_id"])
    title = f"Summary of messages {first}\u2013{last}" if first and last else "Summary"
    details = [_utc_minute(row["created_at"])]
    if row["extractive"]:
        details.append("extractive, written without a model")
    if row["edited"]:
        details.append("edited")
    quoted = "\n".join(f"> {line}".rstrip() for line in _fences_closed(row["content"]).splitlines())
    return f"> **{title}** ({', '.join(details)})\n>\n{quoted}\n\n"


def _markdown_page(*, page: Iterable[dict[str, Any]], numbering: _ChatNumbers) -> str:
    out = []
    for row in page:
        is_chat = row["kind"] == Message.Kind.CHAT
        # Numbered as the app numbers them: the chat messages of the active path (issue 13, branches).
        numbering.observe(message_id=row["id"], is_chat=is_chat and not row["superseded"])
        if is_chat:
            out.append(_markdown_chat(row=row, number=None if row["superseded"] else numbering.chat_seen))
        elif not row["discarded"] and not row["superseded"]:
            out.append(_markdown_summary(row=row, numbers=numbering.numbers))
    return "".join(out)


def _quoted_block(label: str, text: str) -> str:
    """`text` as a quoted block under a bold label (nothing when it is blank)."""
    if not text.strip():
        return ""
    quoted = "\n".join(f"> {line}" if line else ">" for line in text.splitlines())
    return f"> **{label}**\n>\n{quoted}\n\n"


async def _markdown_chunks(*, conversation: Conversation, chunk_rows: int) -> AsyncIterator[str]:
    head = await _read_head(conversation=conversation)
    title = _one_line(conversation.title) or "Untitled chat"
    yield (
        f"# {title}\n\n"
        f"*Exported from Longchat {_utc_minute(timezone.now())} · model: {_one_line(head.config_label)} · "
        f"started {_utc_minute(conversation.created_at)}*\n\n"
        + (f"Folder: {_one_line(folder)}\n\n" if (folder := head.conversation["folder"]) else "")
        + _quoted_block("System prompt", conversation.system_prompt)
        + "---\n\n"
    )
    numbering = _ChatNumbers(wanted=head.summary_covers)
    async for page in _message_pages(
        conversation_id=conversation.pk, through_id=head.through_id, chunk_rows=chunk_rows
    ):
        yield _markdown_page(page=page, numbering=numbering)
