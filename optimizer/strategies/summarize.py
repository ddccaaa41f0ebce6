"""Summaries in packing: the passed summary's place, and what happens to messages evicted now.

Two steps, one on each side of the window choice:

* `PassedSummaryStrategy` ("summary") runs first, whatever the selector chose: once the window has
  moved past what a summary covers (a manual compaction moves it at once), the summary is the only
  trace of those messages, so it is sent whenever it fits. The window must start after what it
  covers. A summary claiming to cover the newest request is ignored.
* `SummarizeStrategy` ("summarize") runs after truncation and acts only when the selector chose
  summarize: the messages evicted now that no summary covers yet become the `SummarySpan` a
  worker folds into the next rolling summary (until it exists the request is simply truncated;
  nothing waits), or, with `summarize_now` (the CLI), a summary written inline, in the room between
  the window and the trigger, where a worker's summary would land on the next turn.
* `SummaryAfterRecallStrategy` ("summary after recall") runs after recall on a request whose window
  yielded to recall (no window state: nothing cached to keep, the budget is filled). There the
  summary and the quotes compete for the same room, and the quotes are ranked by what the newest
  message is about while the summary is not, so the summary (passed, or written inline) takes only
  the room the quotes leave. What it would have covered stays quotable, and the span is still
  reported, so a worker writes it for the turns that follow. On the real dev set any room held for
  the summary before the quotes cost verbatim evidence and found no more answers (README, Recall).
"""

from __future__ import annotations

import math

from ..layout import next_round_after, segments
from ..summaries import SUMMARY_HEADER_TOKENS, summary_body, summary_header, summary_target_tokens
from ..tokens import REPLY_PRIMING, content_chars, count_system
from ..types import Msg, PackedMessage, Summary, SummarySpan
from .base import PackState, SummarizeNow, find

MIN_BODY = 16  # a summary with less room than this for its body is not worth writing


class PassedSummaryStrategy:
    """Places the passed summary: `cover_end`, `lo` (the window starts after it) and its tokens."""

    name = "summary"

    def apply(self, state: PackState) -> None:
        summary = state.summary
        if summary is None:
            return
        state.summary_ok = True
        state.cover_end = find(state.msgs, summary.through_id)
        if state.cover_end >= state.lo:
            state.lo = next_round_after(state.msgs, state.cover_end)
        if state.lo < 0:  # the summary claims to cover the newest request: ignore it
            state.lo, state.cover_end, state.summary_ok = max(state.ws_state, 0), -1, False
        else:
            tokens = summary.tokens if summary.tokens is not None else count_system(summary.content, model=state.model)
            if state.defer_summary:
                state.deferred_tokens = tokens
            else:
                state.summary_tokens = tokens


class SummarizeStrategy:
    """Sets `span` (for a worker) or `new_summary` (written inline); may move the window for its room."""

    name = "summarize"

    def apply(self, state: PackState) -> None:
        if not state.summarizing:
            return
        if state.summarize_now is not None and not state.defer_summary:
            state.room = _summary_room(state, state.trigger - 1 - state.used + state.summary_tokens)
        evicted = segments(state.cover_end + 1, state.ws, state.layout.static)
        if not evicted:
            return
        span_msgs = [m for a, b in evicted for m in state.msgs[a:b]]
        if state.room and state.summarize_now is not None:
            _summarize_inline(state, state.summarize_now, span_msgs)
            if state.new_summary is not None:
                return
        summary = state.summary
        state.span = SummarySpan(
            after_id=summary.through_id if state.summary_ok and summary is not None else None,
            through_id=span_msgs[-1].id,
            ids=tuple(m.id for m in span_msgs),
            tokens=sum(sum(state.toks[a:b]) for a, b in evicted),
            chars=sum(state.segment_chars(a, b) for a, b in evicted),
        )


def _summary_room(state: PackState, free: int) -> int:
    """Room for a summary written now, given `free` tokens for it: what the evicted messages call
    for, capped by `summary_max_share` of the target; 0 when too small to be worth writing."""
    evicted = segments(state.cover_end + 1, state.ws, state.layout.static)
    if not evicted:
        return 0
    evicted_tokens = sum(sum(state.toks[a:b]) for a, b in evicted)
    want = min(
        summary_target_tokens(evicted_tokens + state.summary_tokens, state.config) + SUMMARY_HEADER_TOKENS,
        math.floor(state.target * state.config.summary_max_share),
    )
    want = max(want, state.summary_tokens)
    # The window stays as truncate cut it (to the target, or the stored one under the trigger): the
    # summary takes room above it (up to the trigger, as one written later by a worker would, or
    # what recall left), so an inline summary never shrinks the recent window.
    room = min(want, free)
    return room if room >= SUMMARY_HEADER_TOKENS + MIN_BODY else 0


class SummaryAfterRecallStrategy:
    """On a request whose window yielded to recall: the passed summary, or one written inline, in
    the room the quotes left (see the module docstring)."""

    name = "summary after recall"

    def apply(self, state: PackState) -> None:
        if not state.defer_summary:
            return
        left = state.budget - sum(p.tokens for p in state.out) - REPLY_PRIMING
        if state.summary_ok and state.summary is not None and 0 < state.deferred_tokens <= left:
            state.summary_tokens = state.deferred_tokens
            state.summary_msg = state.passed_summary_message()
        elif state.summarizing and state.summarize_now is not None and state.span is not None and not state.summary_ok:
            # (with a passed summary that did not fit, nothing is written inline: a new summary must roll
            # the passed one in, and there is no room for that; the span is reported for a worker)
            state.room = _summary_room(state, left)
            if not state.room:
                return
            evicted = segments(state.cover_end + 1, state.ws, state.layout.static)
            _summarize_inline(state, state.summarize_now, [m for a, b in evicted for m in state.msgs[a:b]])
            if state.new_summary_msg is None:
                return
            state.summary_msg, state.span = state.new_summary_msg, None
        if state.summary_msg is not None:
            state.out.insert(state.summary_at, state.summary_msg)


def _summarize_inline(state: PackState, summarize_now: SummarizeNow, span: list[Msg]) -> None:
    """Roll the passed summary (when sent) and `span` into a new one that replaces it."""
    prev = state.summary if state.use_summary else None
    new = write_summary(
        summarize_now,
        span,
        previous=summary_body(prev.content) if prev is not None else None,
        prev_ids=tuple(prev.covered_ids) if prev is not None else (),
        room=state.room,
        model=state.model,
    )
    if new is not None:
        state.new_summary = new
        state.new_summary_msg = PackedMessage("system", new.content, new.covered_ids, "summary", new.tokens or 0)


def write_summary(
    summarize_now: SummarizeNow,
    span: list[Msg],
    *,
    previous: str | None,
    prev_ids: tuple[str, ...],
    room: int,
    model: str,
) -> Summary | None:
    """Run the inline summarizer and wrap its text with a header; None if it produced nothing that fits."""
    body = summarize_now(span, previous_summary=previous, target_tokens=room - SUMMARY_HEADER_TOKENS, model=model)
    covered = prev_ids + tuple(m.id for m in span)
    source_chars = sum(content_chars(m.content) for m in span) + (len(previous) if previous else 0)
    lines = body.split("\n") if body else []
    while lines:
        text = "\n".join(lines)
        header = summary_header(covered_messages=len(covered), source_chars=source_chars, summary_chars=len(text))
        content = f"{header}\n{text}"
        tokens = count_system(content, model=model)
        if tokens <= room:
            return Summary(id="inline", content=content, through_id=span[-1].id, covered_ids=covered, tokens=tokens)
        lines.pop()
    return None
