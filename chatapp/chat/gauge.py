"""The context gauge: what the next request would send, against the budget, without sending it; and
the span a summary ahead of need would cover.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

import optimizer
from chatapp.chat.context import ContextInput, context_budget, conversation_config
from chatapp.chat.context_pack import context_build_for
from chatapp.chat.models import Conversation
from chatapp.chat.prompts import PROMPT_IDS
from chatapp.chat.selectors import user_settings_get
from chatapp.providers.llm import LLMTarget, llm_target_for
from optimizer.types import (
    ContextTooLargeError,
    PackConfig,
    PackResult,
    SummarySpan,
)


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
    prompt_shortened: bool = False,
    shortened_message_ids: list[int] | None = None,
) -> dict[str, Any]:
    """The gauge as the chat, the API and the SSE `done` event show it (one shape everywhere).

    `tokens` is what the next request sends; `history_tokens` what the whole live history would take
    — the figure the trigger and the "compact now?" question speak of. `summary_through_id`: the
    last message the summary sent covers (None: no summary sent), so the chat's divider says which
    left-out messages a summary stands in for and which are simply dropped; `summary_quota_reached`:
    today's automatic summaries are used up, so the chat truncates instead; `prompt_shortened`: the
    system prompt or the custom instructions do not fit beside the rest, so they go as head and tail;
    `shortened_message_ids`: the messages sent so too (one too long for the budget beside the newest,
    or the newest itself), which the chat marks where it shows them.
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
        "prompt_shortened": prompt_shortened,
        "shortened_message_ids": shortened_message_ids or [],
    }


def summary_through_id(*, result: PackResult, ctx: ContextInput) -> int | None:
    """The last message the summary sent in `result` covers, or None when none was sent."""
    if not result.info.summary_used or ctx.summary is None:
        return None
    return int(ctx.summary.through_id)


def packed_gauge(*, result: PackResult, ctx: ContextInput, budget: int) -> dict[str, Any]:
    """The gauge of a packed request: what it sends, from which window, with which summary.

    Its strategy is what the request does with the messages before its window. A request that cuts
    nothing new keeps the window of an earlier cut: a summary sent stands in for what that cut left
    out ("summarize"), whichever way the selector would go at the next cut."""
    info = result.info
    strategy = info.strategy_chosen
    if info.optimization_applied and not info.triggered and info.summary_used:
        strategy = "summarize"
    elif strategy == "truncate" and not info.messages_removed:
        # Nothing before the window is left out: the cut only shortened a message (or the system
        # prompt) too long for the budget, which shortened_message_ids and prompt_shortened say.
        strategy = "none"
    return gauge_payload(
        tokens=info.tokens_after,
        budget=budget,
        history_tokens=info.tokens_before,
        window_start_id=int(result.window_start) if result.window_start is not None else None,
        strategy=strategy,
        estimated=info.estimated or ctx.counts_mixed,
        summary_through_id=summary_through_id(result=result, ctx=ctx),
        summary_quota_reached=ctx.quota_exhausted,
        prompt_shortened=any(pid in info.compressed_ids for pid in PROMPT_IDS),
        shortened_message_ids=[int(i) for i in info.compressed_ids if i not in PROMPT_IDS and i.isdigit()],
    )


def too_large_gauge(*, exc: ContextTooLargeError, conversation: Conversation, target: LLMTarget) -> dict[str, Any]:
    """The gauge when the must-keep messages alone exceed the budget: what they need, nothing packed."""
    return gauge_payload(
        tokens=exc.needed,
        budget=exc.budget,
        history_tokens=exc.needed,
        window_start_id=conversation.window_start_id,
        strategy="none",
        estimated=optimizer.is_estimated(target.model) or conversation.token_counts_mixed,
    )


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
        result, ctx = context_build_for(prefs=prefs, conversation=snapshot, target=target, store_window=False)
    except ContextTooLargeError as exc:
        return too_large_gauge(exc=exc, conversation=conversation, target=target)
    return packed_gauge(result=result, ctx=ctx, budget=budget)


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
        result, _ = context_build_for(
            prefs=prefs, conversation=_conversation_snapshot(conversation), target=target, store_window=False,
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
        "offline_reply_count",
        "offline_reply_chars",
        "offline_reply_tokens",
        "truncation_count",
        "summary_count",
        "system_prompt",
        "token_counts_mixed",
        # Whether to look for images: without it a dry run counted each at its image cost, as stored,
        # where a model that does not see them is sent a placeholder.
        "has_images",
    ):
        setattr(copy, name, getattr(conversation, name))
    return copy
