"""ORM adapter for the optimizer: what one chat request loads, how it is packed, and the gauge.

A request never reads the whole history of a long conversation. It loads the static layer (system
messages, pins, the first user message), the newest live summary, and the verbatim window
(`id >= conversation.window_start_id`), each through an index, with stored token counts; the
conversation's running `live_*` totals stand in for everything else.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import Q

import optimizer
from chatapp.chat.layout import row_is_static, static_layer_q
from chatapp.chat.llm import OFFLINE_MODEL, LLMTarget, llm_target_for
from chatapp.chat.models import Conversation, LLMConfig, Message, Preference
from chatapp.chat.recall_source import DatabaseRecallSource
from chatapp.chat.selectors import llm_config_default, user_settings_get
from chatapp.chat.summary_selectors import summary_quota_reason, summary_quota_remaining
from optimizer.budget import trigger_tokens
from optimizer.shape import ShapedRequest, shape_request
from optimizer.tokens import REPLY_PRIMING
from optimizer.types import (
    ContextTooLargeError,
    Counters,
    HistoryTotals,
    Msg,
    PackConfig,
    PackResult,
    Role,
    Summary,
    SummarySpan,
)

# Columns the optimizer needs; content is the bulk of a row, everything else stays in the database.
_MSG_FIELDS = ("id", "role", "content", "pinned", "token_count", "created_at")
# Messages read from the start of a conversation to find its first user message.
_HEAD_PEEK = 8
# Rows fetched per step when walking a conversation backwards by stored counts only.
_TAIL_BATCH = 512
# The selector's words when it may not summarize (optimizer.selector); replaced by the actual cause.
_NO_SUMMARIZER = "no summarizer available"


def live_chat_q() -> Q:
    """Messages that may be sent to a model: chat messages whose exchange survived.

    Stopped, failed or still-streaming replies and replies replaced by Regenerate stay visible in the
    chat but are never sent again.
    """
    return Q(kind=Message.Kind.CHAT, status=Message.Status.COMPLETE, superseded=False)


def message_is_live(*, kind: str, status: str, superseded: bool) -> bool:
    """`live_chat_q()` for one row already in memory."""
    return kind == Message.Kind.CHAT and status == Message.Status.COMPLETE and not superseded


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
    static_ids: frozenset[int] = field(default_factory=frozenset)
    loaded_ids: tuple[int, ...] = ()
    # set by context_build: how long packing took, whether the daily summary quota ruled it, and the
    # request as the model API receives it (optimizer.shape: one leading system message, alternating roles)
    pack_ms: float = 0.0
    quota_exhausted: bool = False
    request: ShapedRequest | None = None


Row = tuple[int, str, str, bool, int, dt.datetime]  # the _MSG_FIELDS columns, as values_list returns them


def _to_msg(row: Row) -> Msg:
    pk, role, content, pinned, tokens, created_at = row
    # A stored count of 0 means "never counted" (a row written by hand); the optimizer then counts it.
    return Msg(
        id=str(pk), role=cast(Role, role), content=content, pinned=pinned, tokens=tokens or None, created_at=created_at
    )


def _tail_start_id(*, conversation: Conversation, tokens: int, through_id: int | None) -> int | None:
    """Id of the oldest live message among the newest ones whose stored counts reach `tokens`.

    Walks backwards over (id, token_count) pairs only, in small batches, so a conversation with no
    window state yet still does not bring its whole history into memory.
    """
    qs = Message.objects.filter(live_chat_q(), conversation=conversation)
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


def first_user_message_id(*, conversation: Conversation, through_id: int | None = None) -> int | None:
    """Id of the first live user message (the one the static layer keeps), read from the head of the
    conversation's (conversation, id) index: filtering on role/status first lets a planner with stale
    statistics sort the whole history."""
    qs = Message.objects.filter(conversation=conversation)
    if through_id is not None:
        qs = qs.filter(id__lte=through_id)
    head = list(qs.order_by("id").values_list("id", "role", "kind", "status", "superseded")[:_HEAD_PEEK])
    for pk, role, kind, status, superseded in head:
        if role == Message.Role.USER and message_is_live(kind=kind, status=status, superseded=superseded):
            return pk
    if len(head) < _HEAD_PEEK:
        return None
    # A conversation opening with many non-user messages: the plain query, rare.
    return (
        qs.filter(live_chat_q(), role=Message.Role.USER).order_by("id").values_list("id", flat=True).first()
    )


def context_load(
    *,
    conversation: Conversation,
    window_start_id: int | None = None,
    through_id: int | None = None,
    load_all: bool = False,
    offline_replies: bool = True,
) -> ContextInput:
    """Load only what the optimizer needs for the next request of `conversation`.

    `window_start_id` overrides the stored window (used when the stored one is empty and the history
    is long); `through_id` bounds the history (Regenerate / Retry answer an earlier user message);
    `load_all` loads every live message — only used when the caller knows the history fits.
    `offline_replies=False` leaves out the offline demo model's replies: they describe the context
    they were sent, not the conversation, and are never history for a real model.
    """
    # Plain tuples, not model instances: building instances was the larger part of a request's cost.
    live = Message.objects.filter(live_chat_q())
    if not offline_replies:
        live = live.exclude(role=Message.Role.ASSISTANT, model=OFFLINE_MODEL)
    if through_id is not None:
        live = live.filter(id__lte=through_id)
    base = live.filter(conversation=conversation)
    start = window_start_id if window_start_id is not None else conversation.window_start_id

    def fetch(qs) -> list[Row]:
        return list(qs.values_list(*_MSG_FIELDS))

    static_ids: set[int] = set()
    first_user_id: int | None
    if load_all or start is None:
        rows = {row[0]: row for row in fetch(base.order_by("id"))}
        first_user_id = next((pk for pk, role, *_ in rows.values() if role == Message.Role.USER), None)
        start = None
    else:
        first_user_id = first_user_message_id(conversation=conversation, through_id=through_id)
        # One read for the window and the static layer below it. Every side of the OR carries its
        # own conversation condition so each is one index range (the window on (conversation, id),
        # the static layer as static_layer_q reads it); SQLite then runs a multi-index OR and
        # PostgreSQL a BitmapOr instead of scanning.
        layer = Q(conversation=conversation, id__gte=start) | static_layer_q(
            first_user_id=first_user_id, conversation=conversation, id__lt=start
        )
        rows = {row[0]: row for row in fetch(live.filter(layer).order_by())}
        # Judged by the core's rule, not by "read from below the window", so _dropped_ranges and the
        # records agree with what pack keeps.
        static_ids.update(
            pk for pk, role, _, pinned, *_ in rows.values()
            if pk < start and row_is_static(pk=pk, role=role, pinned=pinned, first_user_id=first_user_id)
        )

    summary_row = (
        Message.objects.filter(conversation=conversation, kind=Message.Kind.SUMMARY, discarded=False)
        .only("id", "content", "token_count", "covers_through_id")
        .order_by("-id")
        .first()
    )
    summary = None
    if summary_row is not None and summary_row.covers_through_id is not None:
        if through_id is None or summary_row.covers_through_id < through_id:
            summary = Summary(
                id=str(summary_row.pk),
                content=summary_row.content,
                through_id=str(summary_row.covers_through_id),
                tokens=summary_row.token_count or None,
            )
        else:
            summary_row = None
    else:
        summary_row = None

    ordered = [rows[pk] for pk in sorted(rows)]
    window_start = None
    if start is not None:
        # The stored id may belong to a reply that was later superseded: the window begins at the
        # first live message at or after it.
        window_start = next((str(r[0]) for r in ordered if r[0] >= start), None)
    return ContextInput(
        msgs=[_to_msg(r) for r in ordered],
        summary=summary,
        history=HistoryTotals(
            messages=conversation.live_message_count,
            chars=conversation.live_char_count,
            tokens=conversation.live_token_count,
        ),
        counters=Counters(
            summaries_so_far=conversation.summary_count,
            truncations_so_far=conversation.truncation_count,
        ),
        window_start=window_start,
        summary_message_id=summary_row.pk if summary_row is not None else None,
        first_user_id=first_user_id,
        static_ids=frozenset(static_ids),
        loaded_ids=tuple(r[0] for r in ordered),
    )


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


def _quota_allows_summaries(
    *, conversation: Conversation, budget: int, config: PackConfig, preference: str
) -> bool:
    """False when the conversation used its daily automatic summaries (settings.SUMMARIES_PER_DAY).

    Asked only when the optimizer may choose at all (a window exists or the history is past the
    trigger): below that everything is sent and the quota cannot matter, so short chats skip the query.
    """
    if conversation.window_start_id is None and (
        conversation.live_token_count + REPLY_PRIMING < trigger_tokens(budget, config, preference=preference)
    ):
        return True
    return summary_quota_remaining(conversation=conversation) > 0


def _quota_reason(result: PackResult) -> PackResult:
    """Say in the record and the gauge why the selector truncates: the daily limit, not the scores."""
    info = result.info
    if not info.optimization_applied:
        return result
    reason = info.strategy_reason
    quota = summary_quota_reason()
    if _NO_SUMMARIZER in reason:
        reason = reason.replace(_NO_SUMMARIZER, quota)
    else:
        reason = f"{reason} ({quota})" if reason else quota
    return dataclasses.replace(result, info=dataclasses.replace(info, strategy_reason=reason))


def _pack_plan(
    *,
    conversation: Conversation,
    budget: int,
    auto_optimize: bool,
    through_id: int | None,
    preference: str,
    trigger_ratio: float | None = None,
) -> tuple[dict[str, Any], PackConfig, bool]:
    """How to load and pack under the user's automatic-optimization switch.

    On: the optimizer's default trigger (80% of the budget, 70% for fast) and target, with background
    summaries.
    Off: "send everything that fits" — the trigger moves to 100% of the budget. While the whole
    history fits it is all sent verbatim: the window and any summary (a /compact one included) are
    ignored, and the stored window is cleared, since nothing is left out. Once it no longer fits, the
    window is loaded, only what is needed is truncated (target 90%: the smallest cut that leaves
    room for a few more turns), and a summary that exists is sent whenever it fits. No background
    summary is started, since that would be automatic optimization too.
    """
    history = conversation.live_token_count
    if auto_optimize:
        config = PackConfig() if trigger_ratio is None else PackConfig(trigger_ratio=trigger_ratio)
        summarizer = True
    else:
        config = PackConfig(trigger_ratio=1.0, target_ratio=0.9, fast_headroom=0.0, fill_window_ratio=0.9)
        summarizer = False
        if history + REPLY_PRIMING <= budget:
            return {"load_all": True, "through_id": through_id}, config, summarizer
    load: dict[str, Any] = {"through_id": through_id}
    if conversation.window_start_id is None and history > trigger_tokens(budget, config, preference=preference):
        # No window yet but the history is past the trigger (an imported or long conversation):
        # hand the optimizer the newest budget's worth of messages as the candidate window.
        load["window_start_id"] = _tail_start_id(conversation=conversation, tokens=budget, through_id=through_id)
    return load, config, summarizer


def context_build(
    *,
    conversation: Conversation,
    preference: str,
    target: LLMTarget,
    auto_optimize: bool = True,
    through_id: int | None = None,
    store_window: bool = True,
    trigger_ratio: float | None = None,
    recall_fill: bool | None = None,
) -> tuple[PackResult, ContextInput]:
    """Load the context and pack it for `target`; store the window it used (see _window_store).

    Raises ContextTooLargeError when the must-keep messages alone exceed the budget.
    `ctx.pack_ms` is the packing time. `trigger_ratio` overrides the optimizer's trigger
    under automatic optimization (dry runs ahead of need only). `recall_fill` (default: the
    conversation has no stored window yet, so no prompt prefix is cached) lets recall fill the budget.
    """
    budget = context_budget(target=target)
    if recall_fill is None:
        recall_fill = conversation.window_start_id is None
    load, config, summarizer = _pack_plan(
        conversation=conversation,
        budget=budget,
        auto_optimize=auto_optimize,
        through_id=through_id,
        preference=preference,
        trigger_ratio=trigger_ratio,
    )
    quota_exhausted = summarizer and not _quota_allows_summaries(
        conversation=conversation, budget=budget, config=config, preference=preference
    )
    if quota_exhausted:
        summarizer = False
    ctx = context_load(conversation=conversation, offline_replies=target.offline, **load)
    # Recall quotes old messages the window left out; when the whole history is loaded it is all
    # sent, so there is nothing to recall. The source runs no query until pack asks it to search.
    source = None if load.get("load_all") else DatabaseRecallSource(
        conversation=conversation, through_id=through_id, offline_replies=target.offline
    )
    started = time.perf_counter()
    result = optimizer.pack(
        ctx.msgs,
        budget=budget,
        preference=preference if preference in Preference.values else Preference.BALANCED,
        model=target.model,
        window_start=ctx.window_start,
        summary=ctx.summary,
        history=ctx.history,
        counters=ctx.counters,
        summarizer_available=summarizer,
        config=config,
        recall_source=source,
        recall_fill=recall_fill,
    )
    ctx.pack_ms = (time.perf_counter() - started) * 1000
    # What goes on the wire is the shaped request; every figure (record, gauge, note) reports its tokens.
    ctx.request = shape_request(result.messages, model=target.model)
    if ctx.request.tokens != result.info.tokens_after:
        sent = ctx.request.tokens
        result = dataclasses.replace(
            result,
            info=dataclasses.replace(result.info, tokens_after=sent, tokens_saved=result.info.tokens_before - sent),
        )
    if quota_exhausted:
        ctx.quota_exhausted = True
        result = _quota_reason(result)
    if store_window:
        _window_store(
            conversation=conversation,
            new_start=int(result.window_start) if result.window_start is not None else None,
        )
    return result, ctx


def _window_store(*, conversation: Conversation, new_start: int | None) -> None:
    """Store the window this request used (None: everything was sent), as a conditional update.

    The window only moves forward: a request packed before a manual compaction committed must not
    move it back over what the compaction summarized. It is cleared only if nobody moved it since
    this request read it.
    """
    read_start = conversation.window_start_id
    if new_start == read_start:
        return
    rows = Conversation.objects.filter(pk=conversation.pk)
    if new_start is None:
        rows = rows.filter(window_start_id=read_start)
    else:
        rows = rows.filter(Q(window_start_id__isnull=True) | Q(window_start_id__lt=new_start))
    if rows.update(window_start_id=new_start):
        conversation.window_start_id = new_start


def gauge_payload(
    *,
    tokens: int,
    budget: int,
    history_tokens: int,
    window_start_id: int | None,
    strategy: str,
    estimated: bool,
    summary_through_id: int | None = None,
    summary_quota_reached: bool = False,
) -> dict[str, Any]:
    """The gauge as the chat, the API and the SSE `done` event show it (one shape everywhere).

    `tokens` is what the next request sends; `history_tokens` what the whole live history would take
    — the figure the trigger and the "compact now?" question speak of. `summary_through_id`: the
    last message the summary sent covers (None: no summary sent), so the chat's divider says which
    left-out messages a summary stands in for and which are simply dropped; `summary_quota_reached`:
    today's automatic summaries are used up, so the chat truncates instead.
    """
    return {
        "tokens": tokens,
        "budget": budget,
        "ratio": round(tokens / budget, 4) if budget else None,
        "history_tokens": history_tokens,
        "history_ratio": round(history_tokens / budget, 4) if budget else None,
        "window_start_id": window_start_id,
        "strategy": strategy,
        "estimated": estimated,
        "summary_through_id": summary_through_id,
        "summary_quota_reached": summary_quota_reached,
    }


def summary_through_id(*, result: PackResult, ctx: ContextInput) -> int | None:
    """The last message the summary sent in `result` covers, or None when none was sent."""
    if not result.info.summary_used or ctx.summary is None:
        return None
    return int(ctx.summary.through_id)


def context_gauge(
    *, conversation: Conversation, user: User, target: LLMTarget | None = None
) -> dict[str, Any]:
    """Tokens the next request will send (before the new message is typed) against the budget.

    Packs exactly as the next request would, without storing anything.
    """
    if target is None:
        target = llm_target_for(config=conversation_config(conversation=conversation))
    prefs = user_settings_get(user=user)
    budget = context_budget(target=target)
    snapshot = _conversation_snapshot(conversation)
    try:
        result, ctx = context_build(
            conversation=snapshot,
            preference=prefs.preference,
            target=target,
            auto_optimize=prefs.auto_optimize,
            store_window=False,
        )
    except ContextTooLargeError as exc:
        return gauge_payload(
            tokens=exc.needed,
            budget=budget,
            history_tokens=exc.needed,
            window_start_id=conversation.window_start_id,
            strategy="none",
            estimated=optimizer.is_estimated(target.model),
        )
    info = result.info
    return gauge_payload(
        tokens=info.tokens_after,
        budget=budget,
        history_tokens=info.tokens_before,
        window_start_id=int(result.window_start) if result.window_start is not None else None,
        strategy=info.strategy_chosen,
        estimated=info.estimated,
        summary_through_id=summary_through_id(result=result, ctx=ctx),
        summary_quota_reached=ctx.quota_exhausted,
    )


def context_ahead_span(
    *, conversation: Conversation, user: User, target: LLMTarget, margin_tokens: int
) -> SummarySpan | None:
    """What to summarize ahead of need: the span the next request will evict if it crosses the
    trigger, when that request will choose to summarize; None otherwise.

    `margin_tokens` is how much the next exchange is expected to add (the caller passes the size of
    the last one). The dry run packs as the next request would, with the trigger lowered by that
    margin, so it moves the window the way that request will. Nothing is stored. Automatic
    optimization off, or the daily summary quota used up, means no summarizer: None.
    """
    prefs = user_settings_get(user=user)
    if not prefs.auto_optimize:
        return None
    budget = context_budget(target=target)
    default = PackConfig()
    ratio = (budget * default.trigger_ratio - max(0, margin_tokens)) / budget if budget else default.trigger_ratio
    ratio = min(default.trigger_ratio, max(default.target_ratio, ratio))
    try:
        result, _ = context_build(
            conversation=_conversation_snapshot(conversation),
            preference=prefs.preference,
            target=target,
            store_window=False,
            trigger_ratio=ratio,
        )
    except ContextTooLargeError:
        return None
    if result.info.triggered and result.info.strategy_chosen == "summarize":
        return result.summary_span
    return None


def _conversation_snapshot(conversation: Conversation) -> Conversation:
    """A detached copy, so a dry run cannot write the caller's instance back by accident."""
    copy = Conversation(pk=conversation.pk)
    for name in (
        "owner_id",
        "llm_config_id",
        "window_start_id",
        "live_message_count",
        "live_char_count",
        "live_token_count",
        "truncation_count",
        "summary_count",
    ):
        setattr(copy, name, getattr(conversation, name))
    return copy


__all__ = [
    "ContextInput",
    "context_ahead_span",
    "context_budget",
    "context_build",
    "context_gauge",
    "context_load",
    "conversation_config",
    "first_user_message_id",
    "message_is_live",
]
