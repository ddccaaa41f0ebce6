"""Storing one imported conversation (a `ConversationRecord`) at the speed of bulk inserts: what the
import job (import_services) calls once per conversation, inside that conversation's transaction.

The rows are what `message_append` would have stored, written in bulk: the token count for the
model the chat uses (`optimizer.count_message`, as every stored message has it), the character
count, the conversation's running `live_*` totals over its sendable messages, and the full-text
index (`conversation_index_rebuild`: recall and the sidebar search find imported text at once).
Dates are the source's: `created_at` is auto_now_add, which a bulk insert overrides, so the
original dates are written right after the insert (with the ids references need) by one UPDATE per
row through `executemany`: Django's `bulk_update` builds a CASE expression per field and row in
Python, which cost more than everything else an import does (3 conversations of 50 messages a
second on SQLite instead of dozens).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

import optimizer
from chatapp.chat.branch_services import conversation_path_thread
from chatapp.chat.context import is_offline_reply, message_is_live
from chatapp.chat.folder_services import folder_for_import
from chatapp.chat.image_export import images_parse, imported_images_store
from chatapp.chat.image_services import ImageUpload, images_tokens
from chatapp.chat.imports import ConversationError, ConversationRecord, MessageRecord
from chatapp.chat.imports.records import link_column, where
from chatapp.chat.message_services import title_from_text
from chatapp.chat.models import Conversation, Message
from chatapp.chat.reply_stream import reply_cut_note
from chatapp.chat.search_services import conversation_index_rebuild
from chatapp.chat.services import SYSTEM_PROMPT_MAX_CHARS
from chatapp.chat.textsafe import text_storable
from chatapp.providers import llm
from chatapp.providers.models import LLMConfig
from chatapp.providers.selectors import llm_config_default

TITLE_MAX_CHARS = 200
UNTITLED = "Imported chat"
_BATCH_ROWS = 1000
_EXTRA_TEXT = ("model", "error", "reasoning", "finish_reason")
_EXTRA_VALUES = (
    "prompt_tokens", "completion_tokens", "latency_ms", "cost_usd", "covered_message_count", "source_chars",
    "extractive", "discarded", "edited",
)


@dataclass
class ModelChoice:
    """The model an imported chat keeps, for one owner: a config of theirs with the exported chat's
    name and model (our format), else their default (as a new chat gets), else the offline model;
    and the model its token counts are for."""

    owner: User
    _token_models: dict[int | None, str] = field(default_factory=dict)

    def choose(self, *, record: ConversationRecord) -> tuple[LLMConfig | None, bool]:
        if record.offline:
            return None, True
        # Read for each conversation, not once per job: the owner may delete a config (or make another
        # the default) while a long import runs, and a conversation stored on a config read before
        # was refused by the database's foreign key, every one after it with it.
        configs = list(LLMConfig.objects.filter(owner=self.owner))
        wanted = record.llm_config
        if wanted is not None:
            for config in configs:
                if (config.name, config.model) == (wanted["name"], wanted["model"]):
                    return config, False
        default = next((c for c in configs if c.is_default), None) or llm_config_default(owner=self.owner)
        return default, default is None

    def token_model(self, *, config: LLMConfig | None) -> str:
        key = config.pk if config is not None else None
        if key not in self._token_models:
            self._token_models[key] = llm.llm_target_for(config=config).model
        return self._token_models[key]


def conversation_import(*, owner: User, record: ConversationRecord, index: int, models: ModelChoice) -> Conversation:
    """Store `record` as a new conversation of `owner`, with its messages and their index rows.

    Call it inside a transaction: it writes several statements. ConversationError (nothing written
    yet) when a message cannot be stored as it is.
    """
    label = where(index, record.title)
    config, offline = models.choose(record=record)
    token_model = models.token_model(config=config)
    now = timezone.now()
    started = record.created_at or next((m.created_at for m in record.messages if m.created_at), None) or now
    rows, dates, images = _message_rows(record=record, label=label, token_model=token_model, started=started)
    live = [r for r in rows if message_is_live(kind=r.kind, status=r.status, superseded=r.superseded)]
    demo = [r for r in live if is_offline_reply(role=r.role, model=r.model)]
    title, custom = _title(record=record)
    conversation = Conversation.objects.create(
        owner=owner,
        title=title,
        title_is_custom=custom,
        title_requested=True,  # the title the other app gave it (or its first words) stays
        system_prompt=_system_prompt(record=record, label=label),
        llm_config=config,
        offline=offline,
        live_message_count=len(live),
        live_char_count=sum(r.char_count for r in live),
        live_token_count=sum(r.token_count for r in live),
        offline_reply_count=len(demo),
        offline_reply_chars=sum(r.char_count for r in demo),
        offline_reply_tokens=sum(r.token_count for r in demo),
        summary_count=sum(1 for r in rows if r.kind == Message.Kind.SUMMARY and not r.edited),
        folder=folder_for_import(owner=owner, name=record.folder) if record.folder else None,
        has_images=any(images),  # known here: the image store then has no flag to set
    )
    for row in rows:
        row.conversation = conversation
    Message.objects.bulk_create(rows, batch_size=_BATCH_ROWS)
    imported_images_store(rows=rows, images=images)
    ids = {m.ref: row.pk for m, row in zip(record.messages, rows, strict=True) if m.ref}
    _dates_and_links_write(rows=rows, records=record.messages, dates=dates, ids=ids)
    _summary_pins_list(rows=rows, records=record.messages, ids=ids)
    last = dates[-1][0] if dates else started
    Conversation.objects.filter(pk=conversation.pk).update(
        created_at=started,
        updated_at=record.updated_at or max(last, started),
        window_start_id=ids.get(record.window_start_ref) if record.window_start_ref else None,
        pinned_at=record.pinned_at,
        archived_at=record.archived_at,
    )
    if not any("parent" in m.links for m in record.messages):
        # A source with no tree (another product, an export from before branches): one path, each
        # replaced reply a branch of its own, as the message-tree migration made of existing chats.
        conversation_path_thread(conversation_id=conversation.pk)
    conversation_index_rebuild(conversation=conversation)
    return conversation


def _dates_and_links_write(
    *, rows: list[Message], records: list[MessageRecord], dates: list[tuple[datetime, datetime]], ids: dict[str, int]
) -> None:
    """The original dates and the mapped references of rows just inserted: one UPDATE per row."""
    if not rows:
        return
    # Every link column is `<link>_id` (reply_to and edited_from are foreign keys, covers_* plain ids).
    links = sorted({link_column(name) for m in records for name in m.links})
    columns = ["created_at", "updated_at", *links]
    adapt = connection.ops.adapt_datetimefield_value
    params = []
    for row, message, (created, updated) in zip(rows, records, dates, strict=True):
        targets = {link_column(name): ids[target] for name, target in message.links.items()}
        params.append([adapt(created), adapt(updated), *(targets.get(c) for c in links), row.pk])
    assignments = ", ".join(f"{connection.ops.quote_name(c)} = %s" for c in columns)
    table = connection.ops.quote_name(Message._meta.db_table)
    with connection.cursor() as cursor:
        # Names are the model's own; every value is a bound parameter.
        cursor.executemany(f"UPDATE {table} SET {assignments} WHERE id = %s", params)  # noqa: S608


def _summary_pins_list(*, rows: list[Message], records: list[MessageRecord], ids: dict[str, int]) -> None:
    """Each imported summary's `skipped_pin_ids`: the pins it passed over, by their new ids, where the
    file says (our export; a pin since unpinned is then still sent as itself, as it was before the
    export). Where it does not (other apps, our exports before it did), every message pinned now at or
    below the summary's end is listed, as chat migration 0013 did for the summaries stored before the
    column (a pin the summary did read is then sent as itself after an unpin until the next summary:
    some tokens, nothing lost)."""
    pins = [row.pk for row in rows if row.pinned and row.kind == Message.Kind.CHAT and row.role != Message.Role.SYSTEM]
    for row, message in zip(rows, records, strict=True):
        if row.kind != Message.Kind.SUMMARY:
            continue
        if message.skipped_pins is not None:
            skipped = [ids[ref] for ref in message.skipped_pins if ref in ids]
        else:
            end = ids.get(message.links.get("covers_through", ""))
            skipped = [pk for pk in pins if end is not None and pk <= end]
        if skipped:
            Message.objects.filter(pk=row.pk).update(skipped_pin_ids=skipped)


def _message_rows(
    *, record: ConversationRecord, label: str, token_model: str, started: datetime
) -> tuple[list[Message], list[tuple[datetime, datetime]], list[list[ImageUpload]]]:
    """Unsaved rows, their (created_at, updated_at) and images; a message with no date takes the one before."""
    limit = max(settings.MAX_MESSAGE_CHARS, settings.MAX_REPLY_CHARS)
    cut_mark = reply_cut_note()
    rows: list[Message] = []
    dates: list[tuple[datetime, datetime]] = []
    images: list[list[ImageUpload]] = []
    previous = started
    for number, message in enumerate(record.messages, 1):
        what = f"{label}: message {number}"
        text = message.content
        try:
            taken = images_parse(message.extra.get("images"), what=what)
        except ConversationError:
            # Pictures another app kept (images_fallback: the text saying they were there) that a send
            # here would refuse: the message keeps its place without them, not the chat skipped whole.
            if message.extra.get("images_fallback") is None:
                raise
            taken, text = [], message.extra["images_fallback"]
        content = text_storable(text)
        # A reply cut at MAX_REPLY_CHARS is stored with its mark after the cut: the mark is not counted,
        # or the export of such a reply (an exact round trip) would be refused here.
        if len(content.removesuffix(cut_mark)) > limit:
            raise ConversationError(f"{what} is {len(content):,} characters long; the limit is {limit:,}")
        created = message.created_at or previous
        previous = created
        dates.append((created, message.updated_at or created))
        images.append(taken)
        rows.append(_row(message=message, content=content, token_model=token_model))
        rows[-1].token_count += images_tokens(images[-1])  # as a send counts them
    return rows, dates, images


def _row(*, message: MessageRecord, content: str, token_model: str) -> Message:
    extra = message.extra
    fields = {name: text_storable(extra[name]) for name in _EXTRA_TEXT if extra.get(name)}
    if len(fields.get("reasoning", "")) > settings.MAX_REPLY_CHARS:
        # Held to the limit a streamed reply's thinking has, and cut the same way: the answer matters more.
        fields["reasoning"] = fields["reasoning"][: settings.MAX_REPLY_CHARS] + reply_cut_note("Thinking")
    fields.update({name: extra[name] for name in _EXTRA_VALUES if extra.get(name) is not None})
    return Message(
        role=message.role,
        kind=message.kind,
        content=content,
        token_count=optimizer.count_message({"role": message.role, "content": content}, model=token_model),
        char_count=len(content),
        pinned=message.pinned,
        status=message.status,
        superseded=message.superseded,
        **fields,
    )


def _system_prompt(*, record: ConversationRecord, label: str) -> str:
    """The chat's system prompt as stored, held to the limit the app sets for one typed in."""
    text = text_storable(record.system_prompt or "")
    if len(text) > SYSTEM_PROMPT_MAX_CHARS:
        raise ConversationError(
            f"{label}: the system prompt is {len(text):,} characters; the limit is {SYSTEM_PROMPT_MAX_CHARS:,}"
        )
    return text


def _title(*, record: ConversationRecord) -> tuple[str, bool]:
    """The stored title and whether it counts as chosen (a source title) or made from the first message."""
    title = " ".join(text_storable(record.title).split())
    if title:
        return (title if len(title) <= TITLE_MAX_CHARS else title[: TITLE_MAX_CHARS - 1] + "…"), record.title_is_custom
    first = next((m.content for m in record.messages if m.role == Message.Role.USER and m.kind == "chat"), "")
    made = title_from_text(text=text_storable(first)) if first.strip() else UNTITLED
    return made, False
