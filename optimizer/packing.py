"""`pack`: choose what the model sees for one request.

`pack` is an orchestration: the layout rule lives in `optimizer.layout`, each decision in a strategy
of `optimizer.strategies` (summary, truncate, summarize, recall), the statistics in `PackStats`.

Layout of a packed context, in send order:

    static layer   system messages, pinned messages, the first user message (the original request)
    summary        the newest rolling summary, as one system message (whenever one is passed and fits)
    recent window  whole rounds (a user message and the replies after it) from `window_start` on
    recall         quotes of old messages the newest one is about (with a recall source)
    newest         the newest user message

Design choices, and why:

* Trigger and target (see `budget`; "fast" has both lower): nothing changes until the history reaches
  `trigger_ratio` of the budget; then the window is cut to `target_ratio`, not just under the line,
  and its start is state the caller stores and passes back. While the context stays under the
  trigger the window start does not move, so consecutive requests share an exact prefix that
  provider prompt caches reuse.
* The window is a suffix of whole rounds, so it never starts with an orphaned assistant reply and
  never splits a round: the newest whole rounds that fit the target, the newest round always (see
  `strategies.truncate` for why the design notes' minimum recent window yields to the target), but
  replies after the newest user message that do not fit beside the must-keeps are shrunk, then left
  out oldest first, before any must-keep is compressed; the newest message itself (a reply, a tool
  result) is never left out, and is made room for as the newest user message is.
* Must-keep messages (system, pinned, first and newest user message) are sent verbatim. A single
  oversized message (above `oversize_share` of the budget) elsewhere is sent as head + tail with a
  marker; must-keeps are compressed the same way only when they would not fit otherwise, and only as
  far as they must (the room under the trigger), and if even that fails `ContextTooLargeError`
  reports the numbers.
* Summaries: a summary passed in is sent whenever it fits, whatever the strategy: the caller's
  window may already have moved past what it covers (a manual compaction does so at once), so
  leaving it out would lose that history. The strategy decides only what happens to messages
  evicted now: summarize returns those not yet covered as `summary_span` for a worker (until a
  summary exists the request is simply truncated; nothing waits); truncate just leaves them out.
  `summarize_now` lets a caller (the CLI) write the summary inline instead, above the window (which
  is cut to the target either way), under the trigger.
* Recall (`recall_source`): a block quoting old messages the newest one is about, right before it, in
  the room the budget leaves (capped per preference; see `recall.recall_cap` and `recall_fill`).
* Speed: with counts handed in, a request costs a few passes over the message list that run in C
  (attribute maps, `sum`, `list.index`) plus Python work proportional to the window only; nothing
  re-tokenizes history. Only an oversized message is tokenized, and its compression is cached.
* Callers may pass a partial view (static layer + messages from `window_start` on) with
  `HistoryTotals` standing in for the rest. The summary span is then read by id: everything
  non-static after `after_id` (None: from the start) through `through_id`; `ids` lists only the
  span's messages that were in view. A span is reported when its messages are in view, i.e. on the
  request whose trigger evicts them (a caller queues the job then).
* `removed_ids` (and `stats["removed_ids"]`) are the messages in view not sent as themselves,
  including those a summary stands for; `messages_removed` counts against the whole history.
* Idempotence: packing an already packed context with the same budget returns it unchanged: the
  summary becomes part of the static layer, a compressed message is already below the oversize line,
  and the window that fitted the first time fits again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from .budget import budget_problem, target_tokens, trigger_tokens
from .recall import RecallSource
from .selector import WEIGHTS
from .shape import bridge_tokens
from .strategies import AFTER_ASSEMBLY, PLAN, PackState, SummarizeNow
from .strategies.base import begin
from .tokens import REPLY_PRIMING, count_message, is_estimated
from .types import (
    DEFAULT_CONFIG,
    DEFAULT_COUNTERS,
    ContextTooLargeError,
    Counters,
    HistoryTotals,
    Msg,
    PackConfig,
    PackedMessage,
    PackResult,
    PackStats,
    Summary,
)

__all__ = ["NO_CUT_REASON", "PackOptions", "SummarizeNow", "pack"]

# The reason of a turn that packs with window state but cuts nothing: the selector's choice only
# decides what happens to messages a cut evicts, so it is reported as what the next cut will do.
NO_CUT_REASON = "no cut: the history since the last cut is under the trigger, so the window is kept"
BELOW_TRIGGER_REASON = "history is below the trigger; everything is sent unchanged"
FITS_REASON = "history is at or over the trigger but fits the budget, and a cut would save nothing; sent unchanged"
REFILLED_REASON = ("history is at or over the trigger but fits the budget, and a cut would send no fewer tokens "
                   "(the quotes recall adds would fill what it frees); sent unchanged")



class PackOptions(TypedDict, total=False):
    """`pack`'s options but the budget and recall, for a wrapper that hands them on as they are
    (`**options: Unpack[PackOptions]`): what it leaves out takes `pack`'s default."""

    preference: str
    model: str
    window_start: str | None
    summary: Summary | None
    history: HistoryTotals | None
    counters: Counters
    summarizer_available: bool
    config: PackConfig
    summarize_now: SummarizeNow | None


def pack(
    messages: Sequence[Msg],
    *,
    budget: int,
    preference: str = "balanced",
    model: str = "gpt-4o-mini",
    window_start: str | None = None,
    summary: Summary | None = None,
    history: HistoryTotals | None = None,
    counters: Counters = DEFAULT_COUNTERS,
    summarizer_available: bool = True,
    config: PackConfig = DEFAULT_CONFIG,
    summarize_now: SummarizeNow | None = None,
    recall_source: RecallSource | None = None,
    recall_fill: bool | None = None,
) -> PackResult:
    """Pack a conversation into `budget` tokens; see the module docstring for the layout and rules.

    `messages` are chronological and must include every system/pinned message, the first user
    message and every message from `window_start` on (others may be omitted; pass `history` totals
    then). `Msg.tokens` is used when set. `summarize_now(span, previous_summary=, target_tokens=,
    model=) -> str` writes a summary body inline (e.g. `extractive_summary`).
    `recall_fill`: no prompt prefix is cached from an earlier turn, so recall may fill the budget
    (default: when no `window_start` is passed); otherwise it is held to `recall.recall_cap`.
    Raises ValueError on a bad budget/preference and ContextTooLargeError when the must-keep
    messages cannot fit even compressed.
    """
    _validate(budget, preference)
    msgs = messages if isinstance(messages, list) else list(messages)
    toks, given_tokens = _token_counts(msgs, model)
    total_tokens, msg_count = (history.tokens, history.messages) if history is not None else (given_tokens, len(msgs))

    def within(room: int) -> PackResult:
        trigger = trigger_tokens(room, config, preference=preference)
        target = target_tokens(room, config, preference=preference)
        before = _Before(budget, is_estimated(model), trigger, target, total_tokens + REPLY_PRIMING, msg_count)
        # fast path: no window state and the whole history is under the trigger -> send it unchanged
        if not msgs or (window_start is None and before.tokens < trigger):
            return _unchanged(msgs, toks, before)
        if window_start is None and before.tokens <= room <= trigger:
            # The trigger is the budget itself (automatic optimization off) and the history fills it exactly.
            return _unchanged(msgs, toks, before, reason=FITS_REASON)

        def packed(yield_window: bool) -> PackState:
            state = begin(
                msgs, toks, budget=room, preference=preference, model=model, config=config, trigger=trigger,
                target=target, window_start=window_start, history=history, counters=counters,
                summarizer_available=summarizer_available, summary=summary, summarize_now=summarize_now,
                recall_source=recall_source, recall_fill=recall_fill, yield_window=yield_window,
            )
            for strategy in PLAN:
                strategy.apply(state)
            state.assemble()
            for strategy in AFTER_ASSEMBLY:  # quotes around what is sent, so they run on the assembled context
                strategy.apply(state)
            return state

        state = packed(True)
        if state.yielded and (state.recalled is None or state.recalled.tokens < state.yielded):
            # The window gave room to recall that recall did not use (nothing relevant enough): the
            # preference's own window sends more of the conversation, never less than truncation would.
            state = packed(False)
        result = _result(state, before)
        if (window_start is None and msg_count == len(msgs) and before.tokens <= room
                and result.info.tokens_after >= before.tokens):
            # A first cut of a history that fits the budget, whose quotes filled what the cut freed: it
            # would send no fewer tokens than the history itself, which holds every message verbatim.
            return _unchanged(msgs, toks, before, reason=REFILLED_REASON)
        return result

    result = within(budget)
    # The request goes out shaped (optimizer.shape): one that opens with the assistant gets a user line
    # before it. When the line does not fit beside the request, pack again in what the budget leaves.
    bridge = bridge_tokens(result.messages, model=model)
    if bridge and result.info.tokens_after + bridge > budget:
        try:
            return within(max(1, budget - bridge))
        except ContextTooLargeError as exc:
            raise ContextTooLargeError(needed=exc.needed + bridge, budget=budget, detail=exc.detail) from exc
    return result


def _validate(budget: int, preference: str) -> None:
    problem = budget_problem(budget)
    if problem is not None:
        raise ValueError(problem)
    if preference not in WEIGHTS:
        raise ValueError(f"unknown preference {preference!r} (expected one of {', '.join(WEIGHTS)})")


def _token_counts(msgs: list[Msg], model: str) -> tuple[list[int], int]:
    """(per-message counts, their sum): stored counts, counting only the messages that have none."""
    stored = [m.tokens for m in msgs]
    try:
        total = sum(stored)  # type: ignore[arg-type]  # a TypeError here is cheaper than scanning for None first
    except TypeError:
        toks = [t if t is not None else count_message(m, model=model) for t, m in zip(stored, msgs, strict=True)]
        return toks, sum(toks)
    return cast(list[int], stored), total


@dataclass(frozen=True, slots=True)
class _Before:
    """The request as it came in: the figures every `PackStats` starts with."""

    budget: int
    estimated: bool
    trigger: int
    target: int
    tokens: int  # the whole history, reply priming included
    messages: int


def _stats(before: _Before, *, tokens_after: int, **rest: Any) -> PackStats:
    """PackStats with the figures every outcome shares filled in from `before`."""
    return PackStats(
        budget=before.budget,
        estimated=before.estimated,
        trigger_tokens=before.trigger,
        target_tokens=before.target,
        tokens_before=before.tokens,
        messages_before=before.messages,
        tokens_after=tokens_after,
        tokens_saved=before.tokens - tokens_after,
        **rest,
    )


def _result(state: PackState, before: _Before) -> PackResult:
    out, decision, recalled = state.out, state.decision, state.recalled
    tokens_after = sum(p.tokens for p in out) + REPLY_PRIMING
    sent = len(out) - (state.summary_msg is not None) - (recalled is not None)
    window_start = state.msgs[state.ws].id
    info = _stats(
        before,
        optimization_applied=True,
        strategy_chosen=decision.choice,
        strategy_reason=decision.reason if state.triggered else f"{NO_CUT_REASON}; at the next cut: {decision.reason}",
        scores=decision.as_dict(),
        tokens_after=tokens_after,
        messages_after=len(out),
        messages_removed=max(0, before.messages - sent),
        removed_ids=tuple(state.removed),
        summary_needed=state.span is not None,
        summary_generated=state.new_summary is not None,
        summary_used=state.summary_msg is not None,
        triggered=state.triggered,
        window_start=window_start,
        compressed_ids=tuple(p.source_ids[0] for p in out if p.origin == "compressed"),
        recall_ids=recalled.source_ids if recalled else (),
        recall_hit_ids=recalled.hit_ids if recalled else (),
        recall_terms=recalled.terms if recalled else (),
        recall_tokens=recalled.tokens if recalled else 0,
    )
    return PackResult(
        messages=out, info=info, window_start=window_start, summary_span=state.span,
        decision=decision, removed_ids=state.removed, new_summary=state.new_summary,
    )


def _unchanged(msgs: list[Msg], toks: list[int], before: _Before, *, reason: str = BELOW_TRIGGER_REASON
               ) -> PackResult:
    out = [
        PackedMessage(m.role, m.content, (m.id,), "pinned" if m.pinned else "verbatim", t, m.name)
        for m, t in zip(msgs, toks, strict=True)
    ]
    tokens_after = sum(toks) + REPLY_PRIMING
    info = _stats(
        before,
        optimization_applied=False,
        strategy_chosen="none",
        strategy_reason=reason,
        scores={},
        tokens_after=tokens_after,
        messages_after=len(out),
        messages_removed=0,
        removed_ids=(),
        summary_needed=False,
        summary_generated=False,
        summary_used=False,
        triggered=False,
        window_start=None,
        compressed_ids=(),
        recall_ids=(),
        recall_hit_ids=(),
        recall_terms=(),
        recall_tokens=0,
    )
    return PackResult(messages=out, info=info, window_start=None, summary_span=None, decision=None, removed_ids=[])
