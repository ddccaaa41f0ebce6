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
"""

from __future__ import annotations

import math

from ..layout import next_round_after, segments
from ..summaries import SUMMARY_HEADER_TOKENS, summary_body, summary_header, summary_target_tokens
from ..tokens import content_chars, count_system
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
            state.summary_tokens = (
                summary.tokens if summary.tokens is not None else count_system(summary.content, model=state.model)
            )


class SummarizeStrategy:
    """Sets `span` (for a worker) or `new_summary` (written inline); may move the window for its room."""

    name = "summarize"

    def apply(self, state: PackState) -> None:
        if not state.summarizing:
            return
        if state.summarize_now is not None:
            _make_room(state)
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


def _make_room(state: PackState) -> None:
    """Set aside `state.room` for a summary written now, before the window is final."""
    evicted = segments(state.cover_end + 1, state.ws, state.layout.static)
    if not evicted:
        return
    evicted_tokens = sum(sum(state.toks[a:b]) for a, b in evicted)
    want = min(
        summary_target_tokens(evicted_tokens + state.summary_tokens, state.config) + SUMMARY_HEADER_TOKENS,
        math.floor(state.target * state.config.summary_max_share),
    )
    want = max(want, state.summary_tokens)
    # The window stays as truncate cut it (to the target, or the stored one under the trigger): the
    # summary takes room above it, up to the trigger, as one written later by a worker would. So an
    # inline summary never shrinks the recent window, and both paths send the same window.
    room = min(want, state.trigger - 1 - state.used + state.summary_tokens)
    state.room = room if room >= SUMMARY_HEADER_TOKENS + MIN_BODY else 0


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
