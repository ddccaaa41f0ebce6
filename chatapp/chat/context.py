"""ORM adapter for the optimizer: what one chat request loads (packing it: `context_pack`; the gauge:
`gauge`).

A request never reads the whole history of a long conversation. It loads the static layer (system
messages, pins, the first user message), the newest live summary, and the verbatim window
(`id >= conversation.window_start_id`), each through an index, with stored token counts; the
conversation's running `live_*` totals stand in for everything else.

The user's custom instructions and the chat's system prompt (issue 13) open the list as system
messages of their own (`prompts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
from django.db import connection
from django.db.models import Q

import optimizer
from chatapp.chat.layout import row_is_static, static_layer_sides
from chatapp.chat.models import Conversation, Message
from chatapp.chat.prompts import prompts_hash
from chatapp.chat.rowsql import CompiledQuery
from chatapp.providers.llm import OFFLINE_MODEL, LLMTarget
from chatapp.providers.models import LLMConfig
from chatapp.providers.selectors import llm_config_default
from optimizer.shape import ShapedRequest
from optimizer.types import (
    Counters,
    HistoryTotals,
    Msg,
    PackedMessage,
    Role,
    Summary,
)

# Columns the optimizer needs; content is the bulk of a row, everything else stays in the database.
# Not created_at: packing uses a message's date only to quote it, and recall reads its quotes (dates
# as text) itself; parsing a timestamp for every window message cost ~2 ms a turn on PostgreSQL.
_MSG_FIELDS = ("id", "role", "content", "pinned", "token_count")


# Messages read from the start of a conversation to find its first user message.
_HEAD_PEEK = 8


# Rows fetched per step when walking a conversation backwards by stored counts only.
_TAIL_BATCH = 512


def live_chat_q() -> Q:
    """Messages that may be sent to a model: chat messages on the path shown, complete or stopped
    (a stopped reply as far as it went, as the chat shows it; an empty one is left off the wire by
    `optimizer.shape`).

    Failed or still-streaming replies and replies replaced by Regenerate or Retry stay visible in the
    chat but are never sent again.
    """
    return Q(kind=Message.Kind.CHAT, status__in=Message.LIVE_STATUSES, superseded=False)


def message_is_live(*, kind: str, status: str, superseded: bool) -> bool:
    """`live_chat_q()` for one row already in memory."""
    return kind == Message.Kind.CHAT and status in Message.LIVE_STATUSES and not superseded


def offline_reply_q() -> Q:
    """The offline demo model's replies: never history for a real model (context_load)."""
    return Q(role=Message.Role.ASSISTANT, model=OFFLINE_MODEL)


def is_offline_reply(*, role: str, model: str) -> bool:
    """`offline_reply_q()` for one row already in memory."""
    return role == Message.Role.ASSISTANT and model == OFFLINE_MODEL


def live_history(*, conversation: Conversation, offline_replies: bool) -> HistoryTotals:
    """The live history's totals as a request sees it: without the offline demo model's replies for a
    real model (`offline_replies=False`), as context_load leaves them out of what it reads."""
    if offline_replies:
        return HistoryTotals(messages=conversation.live_message_count, chars=conversation.live_char_count,
                             tokens=conversation.live_token_count)
    return HistoryTotals(
        messages=conversation.live_message_count - conversation.offline_reply_count,
        chars=conversation.live_char_count - conversation.offline_reply_chars,
        tokens=conversation.live_token_count - conversation.offline_reply_tokens,
    )


@dataclass(slots=True)
class ContextInput:
    """What context_load read for one request, in the optimizer's terms plus the ids the app needs."""

    msgs: list[Msg]
    summary: Summary | None
    history: HistoryTotals
    counters: Counters
    # Window start handed to the optimizer (str id) — the stored one, or one derived from the tail.
    window_start: str | None = None
    summary_message_id: int | None = None
    first_user_id: int | None = None
    # The conversation's first live message (None when the whole history was read): one before the
    # first user message, an imported greeting, lies below what a windowed read loads.
    first_live_id: int | None = None
    static_ids: frozenset[int] = field(default_factory=frozenset)
    loaded_ids: tuple[int, ...] = ()
    # set by context_build: how long packing took, whether the daily summary quota ruled it, and the
    # request as the model API receives it (optimizer.shape: one leading system message, alternating roles)
    pack_ms: float = 0.0
    quota_exhausted: bool = False
    # The texts recall read for its block, by message id (DatabaseRecallSource.contents).
    recall_contents: dict[int, str] = field(default_factory=dict)
    # Their stored token counts (DatabaseRecallSource.token_counts).
    recall_token_counts: dict[int, int] = field(default_factory=dict)
    request: ShapedRequest | None = None
    # In a chat that holds an image: the packed messages as sent, their images put in
    # (context_images.packed_images_attach), one per packed message; the record keeps what each went
    # out as. None: as packed.
    attached: list[PackedMessage] | None = None
    # For a model that does not see images: by message id, how far a live message's stored count
    # exceeds what it is sent as (its images' cost less their placeholders'; context_images).
    images_overcount: dict[str, int] = field(default_factory=dict)
    # prompts_hash of the custom instructions and system prompt this request opens with.
    prompt_hash: str = ""
    # Stored counts made for a model with another tokenizer (Conversation.token_counts_mixed): estimates.
    counts_mixed: bool = False


Row = tuple[int, str, str, bool | int, int]  # the _MSG_FIELDS columns, as the driver returns them


def _to_msg(row: Row) -> Msg:
    pk, role, content, pinned, tokens = row
    # A stored count of 0 means "never counted" (a row written by hand); the optimizer then counts it.
    # `pinned` as the driver gives it (0/1 on SQLite).
    # Positional (id, role, content, pinned, tokens): one per message of the window, on every turn.
    return Msg(str(pk), cast(Role, role), content, bool(pinned), tokens or None)


def tail_start_id(
    *, conversation: Conversation, tokens: int, through_id: int | None, offline_replies: bool = True
) -> int | None:
    """Id of the oldest live message among the newest ones whose stored counts reach `tokens`
    (`offline_replies=False`: the offline demo model's replies not counted, as context_load leaves them out).

    Walks backwards over (id, token_count) pairs only, in small batches, so a conversation with no
    window state yet still does not bring its whole history into memory.
    """
    qs = Message.objects.filter(live_chat_q(), conversation=conversation)
    if not offline_replies:
        qs = qs.exclude(offline_reply_q())
    if through_id is not None:
        qs = qs.filter(id__lte=through_id)
    total = 0
    start: int | None = None
    upper: int | None = None
    while True:
        batch_qs = qs if upper is None else qs.filter(id__lt=upper)
        batch = list(batch_qs.order_by("-id").values_list("id", "token_count")[:_TAIL_BATCH])
        for pk, count in batch:
            total += count
            start = pk
            if total >= tokens:
                return start
        if len(batch) < _TAIL_BATCH:
            return None  # the whole live history is within `tokens`: no window needed
        upper = batch[-1][0]


_SUMMARY_SQL = (
    f"SELECT id, content, token_count, covers_through_id, skipped_pin_ids FROM {Message._meta.db_table} "  # noqa: S608
    f"WHERE conversation_id = %s AND kind = '{Message.Kind.SUMMARY}' AND NOT discarded AND NOT superseded "
    "ORDER BY id DESC LIMIT 1"
)


def first_user_message_id(*, conversation: Conversation, through_id: int | None = None) -> int | None:
    """Id of the first live user message (the one the static layer keeps); see conversation_head."""
    return conversation_head(conversation=conversation, through_id=through_id)[1]


def conversation_head(*, conversation: Conversation, through_id: int | None = None) -> tuple[int | None, int | None]:
    """(the first live message's id, the first live user message's id), read from the head of the
    conversation's (conversation, id) index: filtering on role/status first lets a planner with stale
    statistics sort the whole history. The first is None when the head holds no live message (rare)."""
    # Plain SQL: it runs on every turn, and the ORM spent more CPU building it than reading it (rowsql).
    sql = f"SELECT id, role, kind, status, superseded FROM {Message._meta.db_table} WHERE conversation_id = %s"  # noqa: S608
    params: list[int] = [conversation.pk]
    if through_id is not None:
        sql += " AND id <= %s"
        params.append(through_id)
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} ORDER BY id LIMIT {_HEAD_PEEK}", params)
        head = cursor.fetchall()
    live = [(pk, role) for pk, role, kind, status, superseded in head
            if message_is_live(kind=kind, status=status, superseded=superseded)]
    first_live = live[0][0] if live else None
    first_user = next((pk for pk, role in live if role == Message.Role.USER), None)
    if first_user is not None or len(head) < _HEAD_PEEK:
        return first_live, first_user
    # A conversation opening with many non-user messages: the plain query, rare.
    qs = Message.objects.filter(conversation=conversation)
    if through_id is not None:
        qs = qs.filter(id__lte=through_id)
    return first_live, (
        qs.filter(live_chat_q(), role=Message.Role.USER).order_by("id").values_list("id", flat=True).first()
    )


def _context_rows_query(
    shape: tuple[bool, bool, bool, bool], *, conversation_id: int, start: int | None = None,
    through_id: int | None = None, first_user_id: int | None = None,
) -> Any:
    """The live messages a request may send: the whole history (`whole`), or the window from `start`
    and the static layer below it. One statement, a UNION ALL of one index range per side (the window
    on (conversation, id), the static layer's sides as static_layer_sides gives them; a row in two
    sides comes twice, and context_load keeps it once). Not one OR: PostgreSQL estimates `id >= start`
    over the whole table, so for a long conversation whose ids are old (most of the table's ids above
    the window's start) it read all the conversation's rows through one bitmap and filtered them,
    45-70 ms a turn for a 100,000-message conversation of a 1M-message table; each branch planned alone
    seeks its own range. `shape`: (offline replies kept, whole, bounded by `through_id`, with
    `first_user_id`)."""
    offline_replies, whole, _, _ = shape
    live = Message.objects.filter(live_chat_q())
    if not offline_replies:
        live = live.exclude(offline_reply_q())
    if through_id is not None:
        live = live.filter(id__lte=through_id)
    if whole:
        return live.filter(conversation_id=conversation_id).order_by("id").values_list(*_MSG_FIELDS)
    window, *static = [
        live.filter(side).order_by().values_list(*_MSG_FIELDS)
        for side in [
            Q(conversation_id=conversation_id, id__gte=start),
            *static_layer_sides(first_user_id=first_user_id, conversation_id=conversation_id, id__lt=start),
        ]
    ]
    return window.union(*static, all=True)


_CONTEXT_ROWS = CompiledQuery(_context_rows_query)


def context_load(
    *,
    conversation: Conversation,
    window_start_id: int | None = None,
    through_id: int | None = None,
    load_all: bool = False,
    offline_replies: bool = True,
    prompts: Sequence[Msg] = (),
) -> ContextInput:
    """Load only what the optimizer needs for the next request of `conversation`.

    `window_start_id` overrides the stored window (used when the stored one is empty and the history
    is long); `through_id` bounds the history (Regenerate / Retry answer an earlier user message);
    `load_all` loads every live message — only used when the caller knows the history fits.
    `offline_replies=False` leaves out the offline demo model's replies: they describe the context
    they were sent, not the conversation, and are never history for a real model.
    `prompts` (`prompt_msgs`) open the list, and count in the history totals as the static messages
    they are: the trigger and the strategy scores see the request the model gets.
    """
    # Plain tuples, not model instances: building instances was the larger part of a request's cost;
    # and the query compiled once per shape (_CONTEXT_ROWS), as building it cost more than running it.
    start = window_start_id if window_start_id is not None else conversation.window_start_id
    bounds = {} if through_id is None else {"through_id": through_id}

    static_ids: set[int] = set()
    first_user_id: int | None
    first_live_id: int | None = None
    if load_all or start is None:
        found = _CONTEXT_ROWS.rows((offline_replies, True, through_id is not None, False),
                                   conversation_id=conversation.pk, **bounds)
        rows = {row[0]: row for row in found}
        first_user_id = next((pk for pk, role, *_ in rows.values() if role == Message.Role.USER), None)
        start = None
    else:
        first_live_id, first_user_id = conversation_head(conversation=conversation, through_id=through_id)
        first = {} if first_user_id is None else {"first_user_id": first_user_id}
        found = _CONTEXT_ROWS.rows((offline_replies, False, through_id is not None, first_user_id is not None),
                                   conversation_id=conversation.pk, start=start, **bounds, **first)
        rows = {row[0]: row for row in found}
        # Judged by the core's rule, not by "read from below the window", so record_dropped_ranges and the
        # records agree with what pack keeps.
        static_ids.update(
            pk for pk, role, _, pinned, *_ in rows.values()
            if pk < start and row_is_static(pk=pk, role=role, pinned=bool(pinned), first_user_id=first_user_id)
        )

    # The active path's summary (one written on another branch covers messages this path lacks), on
    # msg_conv_summary_idx; plain SQL, as every turn reads it (rowsql says why).
    with connection.cursor() as cursor:
        cursor.execute(_SUMMARY_SQL, [conversation.pk])
        summary_row = cursor.fetchone()
    summary = None
    if summary_row is not None and summary_row[3] is not None:
        summary_id, content, tokens, covers_through_id, passed_over = summary_row
        if through_id is None or covers_through_id < through_id:
            summary = Summary(id=str(summary_id), content=content, through_id=str(covers_through_id),
                              tokens=tokens or None)
            if passed_over:
                _passed_over_keep(rows, ids=_json_ids(passed_over), conversation=conversation, start=start,
                                  through_id=through_id, offline_replies=offline_replies, static_ids=static_ids)
        else:
            summary_row = None
    else:
        summary_row = None

    ordered = sorted(rows.values())  # by id: the keys are the rows' first values
    window_start = None
    if start is not None:
        # The stored id may belong to a reply that was later superseded: the window begins at the
        # first live message at or after it.
        window_start = next((str(r[0]) for r in ordered if r[0] >= start), None)
    live = live_history(conversation=conversation, offline_replies=offline_replies)
    return ContextInput(
        msgs=[*prompts, *(_to_msg(r) for r in ordered)],
        summary=summary,
        history=HistoryTotals(
            messages=live.messages + len(prompts),
            chars=live.chars + sum(m.chars or 0 for m in prompts),
            tokens=live.tokens + sum(m.tokens or 0 for m in prompts),
        ),
        counters=Counters(
            summaries_so_far=conversation.summary_count,
            truncations_so_far=conversation.truncation_count,
        ),
        window_start=window_start,
        summary_message_id=summary_row[0] if summary_row is not None else None,
        first_user_id=first_user_id,
        first_live_id=first_live_id,
        static_ids=frozenset(static_ids),
        loaded_ids=tuple(r[0] for r in ordered),
        prompt_hash=prompts_hash(prompts),
        counts_mixed=conversation.token_counts_mixed,
    )


def _json_ids(value: str | list[int]) -> list[int]:
    # A JSON column read by plain SQL: text on SQLite and, as Django sets psycopg up, on PostgreSQL.
    return orjson.loads(value) if isinstance(value, str) else list(value)


def _passed_over_keep(
    rows: dict[int, Row], *, ids: list[int], conversation: Conversation, start: int | None, through_id: int | None,
    offline_replies: bool, static_ids: set[int],
) -> None:
    """Keep in the static layer, as pins, the messages the summary in use passed over because they were
    pinned (Message.skipped_pin_ids): no summary holds them, so one unpinned since is still sent as
    itself until a summary folds it in (summary_writing.span_plan). Those still pinned were read
    with the pins; the others (rare: unpinned while a summary passed them over) in one more read."""
    missing = [pk for pk in ids if pk not in rows and (through_id is None or pk <= through_id)]
    if missing:
        found = Message.objects.filter(live_chat_q(), conversation=conversation, id__in=missing)
        if not offline_replies:
            found = found.exclude(offline_reply_q())
        rows.update((row[0], row) for row in found.values_list(*_MSG_FIELDS))
    for pk in ids:
        row = rows.get(pk)
        if row is None:
            continue  # deleted, or off the path shown
        rows[pk] = (row[0], row[1], row[2], True, row[4])
        if start is not None and pk < start:
            static_ids.add(pk)


def context_budget(*, target: LLMTarget) -> int:
    return optimizer.compute_budget(
        context_window=target.context_window, max_output_tokens=target.max_output_tokens
    )


def conversation_config(*, conversation: Conversation) -> LLMConfig | None:
    """The conversation's model config; None for the offline demo model. A chat whose config was
    deleted uses the owner's default."""
    if conversation.offline:
        return None
    if conversation.llm_config_id is not None:
        return conversation.llm_config
    return llm_config_default(owner=conversation.owner)
