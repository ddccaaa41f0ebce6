"""Packing a chat request with the optimizer: the user's preference and model budget, the daily summary
quota, the stored window start moved when the trigger fires (the state that keeps the prompt prefix
cacheable), and the recall source over the full-text index.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from django.db.models import Q

import optimizer
from chatapp.chat.context import ContextInput, context_budget, context_load, live_history, tail_start_id
from chatapp.chat.context_images import (
    images_overcount,
    msgs_counted_as_sent,
    overcounts_as_sent,
    packed_images_attach,
)
from chatapp.chat.models import Conversation, Preference, UserSettings
from chatapp.chat.prompts import PROMPT_IDS, prompt_msgs
from chatapp.chat.recall_source import DatabaseRecallSource
from chatapp.chat.summary_selectors import summary_quota_reason, summary_quota_remaining
from chatapp.providers.llm import LLMTarget
from optimizer.budget import trigger_tokens
from optimizer.shape import shape_request
from optimizer.tokens import REPLY_PRIMING
from optimizer.types import (
    PackConfig,
    PackResult,
)

# The selector's words when it may not summarize (optimizer.selector); replaced by the actual cause.
_NO_SUMMARIZER = "no summarizer available"


def _quota_allows_summaries(
    *, conversation: Conversation, budget: int, config: PackConfig, preference: str, history: int
) -> bool:
    """False when the conversation used its daily automatic summaries (settings.SUMMARIES_PER_DAY).

    Asked only when the optimizer may choose at all (a window exists or the history is past the
    trigger): below that everything is sent and the quota cannot matter, so short chats skip the query.
    """
    if conversation.window_start_id is None and (
        history + REPLY_PRIMING < trigger_tokens(budget, config, preference=preference)
    ):
        return True
    return summary_quota_remaining(conversation=conversation) > 0


# Why no summarizer is offered when automatic optimization is off (the user's switch, not the scores).
_AUTO_OFF_REASON = "automatic optimization is off (Settings), so nothing is summarized"


def _no_summarizer_reason(result: PackResult, *, cause: str) -> PackResult:
    """Say in the record and the gauge why the selector truncates: `cause` (the daily limit, the
    user's switch), not the scores."""
    info = result.info
    if not info.optimization_applied:
        return result
    reason = info.strategy_reason
    if _NO_SUMMARIZER in reason:
        reason = reason.replace(_NO_SUMMARIZER, cause)
    else:
        reason = f"{reason} ({cause})" if reason else cause
    return dataclasses.replace(result, info=dataclasses.replace(info, strategy_reason=reason))


def _pack_plan(
    *,
    conversation: Conversation,
    budget: int,
    auto_optimize: bool,
    through_id: int | None,
    preference: str,
    history: int,
    offline_replies: bool,
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
    summary is started, since that would be automatic optimization too. `history`: the live history's
    tokens as this target sees it (context.live_history), the custom instructions and system prompt
    included: they are sent with it.
    """
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
        load["window_start_id"] = tail_start_id(conversation=conversation, tokens=budget, through_id=through_id,
                                                offline_replies=offline_replies)
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
    instructions: str = "",
) -> tuple[PackResult, ContextInput]:
    """Load the context and pack it for `target`; store the window it used (see _window_store).

    Raises ContextTooLargeError when the must-keep messages alone exceed the budget.
    `ctx.pack_ms` is the packing time. `trigger_ratio` overrides the optimizer's trigger
    under automatic optimization (dry runs ahead of need only). `recall_fill` (default: the
    conversation has no stored window yet, so no prompt prefix is cached) lets recall fill the budget.
    `instructions` are the user's custom instructions (the caller has the settings row already); they
    and the conversation's system prompt open the context (prompts.prompt_msgs).
    """
    budget = context_budget(target=target)
    prompts = prompt_msgs(instructions=instructions, system_prompt=conversation.system_prompt, model=target.model)
    # A model that does not see images is sent a placeholder for each: the history as it is sent.
    placeholders = conversation.has_images and not target.sees_images
    overcounts = images_overcount(conversation_id=conversation.pk, model=target.model) if placeholders else {}
    history = live_history(conversation=conversation, offline_replies=target.offline).tokens + sum(
        m.tokens or 0 for m in prompts
    ) - sum(overcounts.values())
    if recall_fill is None:
        recall_fill = conversation.window_start_id is None
    load, config, summarizer = _pack_plan(
        conversation=conversation, budget=budget, auto_optimize=auto_optimize, through_id=through_id,
        preference=preference, history=history, offline_replies=target.offline, trigger_ratio=trigger_ratio,
    )
    quota_exhausted = summarizer and not _quota_allows_summaries(
        conversation=conversation, budget=budget, config=config, preference=preference, history=history
    )
    if quota_exhausted:
        summarizer = False
    ctx = context_load(conversation=conversation, offline_replies=target.offline, prompts=prompts, **load)
    if placeholders:
        stored = ctx.msgs
        ctx.msgs = msgs_counted_as_sent(stored, model=target.model)  # placeholders, not the images' cost
        # The full history as the request would send it: the loaded messages by their own recount (the
        # estimate read 3 tokens saved on three images sent unchanged), the estimate for the others only.
        ctx.images_overcount = overcounts_as_sent(stored, ctx.msgs, estimates=overcounts)
        ctx.history = dataclasses.replace(ctx.history, tokens=ctx.history.tokens - sum(ctx.images_overcount.values()))
    # Recall quotes old messages the window left out; when the whole history is loaded it is all
    # sent, so there is nothing to recall. The source runs no query until pack asks it to search.
    source = None if load.get("load_all") else DatabaseRecallSource(
        conversation=conversation, through_id=through_id, offline_replies=target.offline
    )
    started = time.perf_counter()

    def packed(room: int) -> PackResult:
        return optimizer.pack(
            ctx.msgs,
            budget=room,
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

    result = packed(budget)
    if ctx.counts_mixed:
        result = _refit(result, budget=budget, model=target.model, pack=packed)
    ctx.pack_ms = (time.perf_counter() - started) * 1000
    if result.window_start in PROMPT_IDS:
        # A window reaching back to the head of the list starts at position 0, a prompt here: stored
        # and reported as the first loaded message, the start the same window has without prompts.
        first = str(ctx.loaded_ids[0]) if ctx.loaded_ids else None
        result = dataclasses.replace(
            result, window_start=first, info=dataclasses.replace(result.info, window_start=first)
        )
    if source is not None:
        ctx.recall_contents = source.contents
        ctx.recall_token_counts = source.token_counts
    # What goes on the wire is the shaped request; every figure (record, gauge, note) reports its tokens.
    ctx.attached = (packed_images_attach(result.messages, sees=target.sees_images, model=target.model,
                                         loaded=ctx.msgs) if conversation.has_images else None)
    ctx.request = shape_request(ctx.attached or result.messages, model=target.model)
    if ctx.request.tokens != result.info.tokens_after:
        # The whole history would go out shaped the same way (the prompts merged into one system
        # message): "full" moves with "sent", so shaping alone never reads as tokens saved.
        shaping = result.info.tokens_after - ctx.request.tokens
        result = dataclasses.replace(
            result,
            info=dataclasses.replace(result.info, tokens_after=ctx.request.tokens,
                                     tokens_before=result.info.tokens_before - shaping),
        )
    if quota_exhausted:
        ctx.quota_exhausted = True
        result = _no_summarizer_reason(result, cause=summary_quota_reason())
    elif not auto_optimize:
        result = _no_summarizer_reason(result, cause=_AUTO_OFF_REASON)
    if store_window:
        _window_store(
            conversation=conversation,
            new_start=int(result.window_start) if result.window_start is not None else None,
        )
    return result, ctx


def _refit(result: PackResult, *, budget: int, model: str, pack: Callable[[int], PackResult]) -> PackResult:
    """The packed request counted with `model`'s own tokenizer, and packed again in less room until
    that count fits `budget`.

    Stored counts are made once, by the tokenizer of the model the chat had then; a chat moved to a
    model with another tokenizer (Conversation.token_counts_mixed) is packed on those estimates. From
    o200k to cl100k, Russian text counts some 1.7-2.3 times as many tokens (Japanese 1.4): a request
    packed to its budget went out past the model's window, and the provider refused it. Counting the
    packed request (not the history) costs a few milliseconds, on these chats only. The next room holds
    the packed request's estimate scaled by how much the estimates undercount it, less 1 % of the
    budget (the two tokenizers' ratio varies from text to text): taking only the overshoot off a room
    whose trigger the history stays under changed nothing, and after a fixed number of such tries the
    last packing went out uncounted, past the window. Every packing is counted; the room shrinks each
    time, so this ends: fitted, or ContextTooLargeError when the must-keep messages do not fit it.
    """
    room = budget
    while (exact := optimizer.count_messages(shape_request(result.messages, model=model).messages,
                                             model=model)) > budget:
        if room == 1:  # a last stop: no request of a message fits a room of one token
            raise optimizer.ContextTooLargeError(needed=exact, budget=budget, detail="the packed request")
        room = max(1, min(room - (exact - budget), result.info.tokens_after * budget // exact) - budget // 100)
        try:
            result = pack(room)
        except optimizer.ContextTooLargeError as exc:
            # Told in the model's tokens, against its budget: the room was cut by what the estimates
            # undercount, so that is what the must-keep messages need beyond their estimate.
            raise optimizer.ContextTooLargeError(needed=exc.needed + budget - room, budget=budget,
                                                 detail=exc.detail) from exc
    # The figures report the model's budget, not the room the estimates were packed into.
    return dataclasses.replace(result, info=dataclasses.replace(result.info, budget=budget))


def context_build_for(
    *,
    prefs: UserSettings,
    conversation: Conversation,
    target: LLMTarget,
    through_id: int | None = None,
    store_window: bool = True,
    trigger_ratio: float | None = None,
) -> tuple[PackResult, ContextInput]:
    """context_build as the user's settings ask for it: their preference, automatic optimization and
    custom instructions — what the turn packs with, and the dry runs that must pack the same."""
    return context_build(
        conversation=conversation,
        preference=prefs.preference,
        target=target,
        auto_optimize=prefs.auto_optimize,
        through_id=through_id,
        store_window=store_window,
        trigger_ratio=trigger_ratio,
        instructions=prefs.custom_instructions,
    )


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
