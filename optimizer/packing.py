"""`pack`: choose what the model sees for one request.

Layout of a packed context, in send order:

    static layer   system messages, pinned messages, the first user message (the original request)
    summary        the newest rolling summary, as one system message (whenever one is passed and fits)
    recent window  whole rounds (a user message and the replies after it) from `window_start` to the end

Design choices, and why:

* Trigger and target (see `budget`): nothing changes until the history reaches `trigger_ratio` of the
  budget; then the window is cut to `target_ratio`, not just under the line, and its start is state
  the caller stores and passes back. While the context stays under the trigger the window start does
  not move, so consecutive requests share an exact prefix that provider prompt caches reuse.
* The window is a suffix of whole rounds, so it never starts with an orphaned assistant reply and
  never splits a round. The design notes' minimum recent window (4 / 6 / 8 rounds / everything, by
  conversation length) may use the whole budget; further rounds are added only up to the target.
* Must-keep messages (system, pinned, first and newest user message) are sent verbatim. A single
  oversized message (above `oversize_share` of the budget) elsewhere is sent as head + tail with a
  marker; must-keeps are compressed the same way only when they would not fit otherwise, and if even
  that fails `ContextTooLargeError` reports the numbers.
* Summaries: a summary passed in is sent whenever it fits, whatever the strategy: the caller's
  window may already have moved past what it covers (a manual compaction does so at once), so
  leaving it out would lose that history. The strategy decides only what happens to messages
  evicted now: summarize returns those not yet covered as `summary_span` for a worker (until a
  summary exists the request is simply truncated; nothing waits); truncate just leaves them out.
  `summarize_now` lets a caller (the CLI) write the summary inline instead.
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

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any

from .budget import min_recent_rounds, target_tokens, trigger_tokens
from .recall import RECALL_CAP, Recall, RecallSource, recall
from .selector import WEIGHTS, select_strategy
from .summaries import summary_body, summary_header, summary_target_tokens
from .tokens import REPLY_PRIMING, _encoding_name, content_chars, content_text, count_message, count_text
from .truncation import compress_text
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
    Summary,
    SummarySpan,
)

MUST_KEEP_DETAIL = "system, pinned, first and newest messages; oversized ones compressed"
CHARS_SCAN_LIMIT = 10_000  # the largest character threshold in the strategy scores
SummarizeNow = Callable[..., str]  # (span, *, previous_summary, target_tokens, model) -> summary body



def _indices(values: list[Any], value: Any) -> list[int]:
    """Positions of `value` in `values`, found by C-level `list.index` (cheap when rare)."""
    out: list[int] = []
    i = -1
    try:
        while True:
            i = values.index(value, i + 1)
            out.append(i)
    except ValueError:
        return out


def _chars(msgs: Sequence[Msg]) -> int:
    """Characters of the messages' contents (stored `Msg.chars` when present)."""
    return sum([
        m.chars if m.chars is not None else len(m.content) if m.content.__class__ is str else content_chars(m.content)
        for m in msgs
    ])


def _segment_chars(msgs: list[Msg], stored: list[int | None] | None, a: int, b: int) -> int:
    if stored is not None:
        with contextlib.suppress(TypeError):  # some counts missing: measure instead
            return sum(stored[a:b])  # type: ignore[arg-type]
    return _chars(msgs[a:b])


def _decision_chars(msgs: list[Msg], stored: list[int | None]) -> tuple[int, bool]:
    """(characters, whether that is only a lower bound) for the strategy scores.

    Exact when every message carries `chars`. Otherwise the scan stops past 10,000 characters (the
    largest threshold in the scores): reading every message's content is the one pass that would not
    be cheap on a long history. Callers with running totals pass `HistoryTotals.chars` instead.
    """
    with contextlib.suppress(TypeError):  # a TypeError: some counts are missing
        return sum(stored), False  # type: ignore[arg-type]
    total = 0
    for i in range(len(msgs) - 1, -1, -1):
        c = stored[i]
        total += c if c is not None else content_chars(msgs[i].content)
        if total > CHARS_SCAN_LIMIT:
            return total, i > 0
    return total, False


def _segments(lo: int, hi: int, static: list[int]) -> list[tuple[int, int]]:
    """[lo, hi) minus the static positions, as a few contiguous ranges."""
    out = []
    start = lo
    for s in static:
        if s < lo:
            continue
        if s >= hi:
            break
        if s > start:
            out.append((start, s))
        start = s + 1
    if hi > start:
        out.append((start, hi))
    return out


class _Packer:
    """One pack() call's working state: token counts, must-keeps and compressed sizes."""

    def __init__(self, msgs: list[Msg], toks: list[int], model: str, oversize_limit: int, must: set[int]) -> None:
        self.msgs = msgs
        self.toks = toks
        self.model = model
        self.limit = oversize_limit
        self.must = must
        self.must_compressed: set[int] = set()  # must-keeps compressed in an emergency
        self.compressed: dict[int, tuple[str, int]] = {}

    def is_compressed(self, i: int) -> bool:
        if self.toks[i] <= self.limit:
            return False
        return i not in self.must or i in self.must_compressed

    def eff(self, i: int) -> int:
        """Tokens message i costs as sent (compressed size when it is sent compressed)."""
        return self.compress(i)[1] if self.is_compressed(i) else self.toks[i]

    def compress(self, i: int) -> tuple[str, int]:
        """(content, tokens) of message i cut down to the oversize limit."""
        hit = self.compressed.get(i)
        if hit is None:
            m = self.msgs[i]
            overhead = count_message(Msg(id=m.id, role=m.role, content="", name=m.name), model=self.model)
            text = content_text(m.content)
            if not isinstance(m.content, str):
                others = sum(1 for p in m.content if not (isinstance(p, dict) and p.get("type") == "text"))
                if others:
                    text += f"\n[{others} non-text part{'s' if others != 1 else ''} omitted]"
            body = compress_text(text, limit=max(0, self.limit - overhead), model=self.model)
            hit = (body, overhead + count_text(body, model=self.model))
            self.compressed[i] = hit
        return hit


def _validate(budget: int, preference: str) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"budget must be a positive integer, got {budget!r}")
    if preference not in WEIGHTS:
        raise ValueError(f"unknown preference {preference!r} (expected one of {', '.join(WEIGHTS)})")


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
    recall_drop_terms: Sequence[str] = (),
) -> PackResult:
    """Pack a conversation into `budget` tokens; see the module docstring for the layout and rules.

    `messages` are chronological and must include every system/pinned message, the first user
    message and every message from `window_start` on (others may be omitted; pass `history` totals
    then). `Msg.tokens` is used when set. `summarize_now(span, previous_summary=, target_tokens=,
    model=) -> str` writes a summary body inline (e.g. `extractive_summary`).
    Raises ValueError on a bad budget/preference and ContextTooLargeError when the must-keep
    messages cannot fit even compressed.
    """
    _validate(budget, preference)
    msgs = messages if isinstance(messages, list) else list(messages)
    n = len(msgs)
    toks = [m.tokens for m in msgs]
    try:
        given_tokens = sum(toks)  # a TypeError here is cheaper than scanning for None first
    except TypeError:
        toks = [t if t is not None else count_message(m, model=model) for t, m in zip(toks, msgs, strict=True)]
        given_tokens = sum(toks)
    estimated = _encoding_name(model)[1]
    trigger = trigger_tokens(budget, config)
    target = target_tokens(budget, config)
    total_tokens = history.tokens if history is not None else given_tokens
    msg_count = history.messages if history is not None else n
    base_stats: dict[str, Any] = {
        "budget": budget,
        "estimated": estimated,
        "trigger_tokens": trigger,
        "target_tokens": target,
        "tokens_before": total_tokens + REPLY_PRIMING,
        "messages_before": msg_count,
    }

    # fast path: no window state and the whole history is under the trigger -> send it unchanged
    if n == 0 or (window_start is None and total_tokens + REPLY_PRIMING < trigger):
        return _unchanged(msgs, toks, base_stats)

    # a couple of passes that run in C find the system and pinned messages; the rest walks from an end
    static = _indices([m.role for m in msgs], "system")
    pins = [m.pinned for m in msgs]
    if any(pins):
        static = sorted({*static, *_indices(pins, True)})
    first_user = next((i for i in range(n) if msgs[i].role == "user"), -1)
    if config.keep_first_user and first_user >= 0 and first_user not in static:
        static = sorted([*static, first_user])
    static_set = set(static)
    last_user = next((i for i in range(n - 1, -1, -1) if msgs[i].role == "user"), -1)
    must = static_set | ({last_user} if last_user >= 0 else set())

    stored_chars = [m.chars for m in msgs] if history is None else None
    chars, chars_at_least = (history.chars, False) if stored_chars is None else _decision_chars(msgs, stored_chars)
    decision = select_strategy(
        message_count=msg_count,
        char_count=chars,
        preference=preference,
        summaries_so_far=counters.summaries_so_far,
        truncations_so_far=counters.truncations_so_far,
        summarizer_available=summarizer_available,
        chars_at_least=chars_at_least,
    )
    summarizing = decision.choice == "summarize"

    oversize = max(1, math.floor(budget * config.oversize_share))
    pk = _Packer(msgs, toks, model, oversize, must)

    # where the stored state puts the window (snapped forward to a round start)
    ws_state = -1
    if window_start is not None:
        ws_state = _find(msgs, window_start)
        while 0 < ws_state < n and msgs[ws_state].role != "user":
            ws_state += 1
        if ws_state >= n:
            ws_state = max(last_user, 0)

    # The newest summary is sent whenever it fits, whatever the selector chose: once the window has
    # moved past what it covers (a manual compaction moves it at once), it is the only trace of those
    # messages. The selector only decides whether messages evicted now are summarized next (the span)
    # or just left out. The window must start after what the summary covers.
    summary_tokens = 0
    cover_end = -1  # last position (in view) that the summary covers
    lo = max(ws_state, 0)
    summary_ok = summary is not None
    if summary is not None:
        cover_end = _find(msgs, summary.through_id)
        if cover_end >= lo:
            lo = next((i for i in range(cover_end + 1, n) if msgs[i].role == "user"), -1)
        if lo < 0:  # the summary claims to cover the newest request: ignore it
            lo, cover_end, summary_ok = max(ws_state, 0), -1, False
        else:
            summary_tokens = summary.tokens if summary.tokens is not None else _system_tokens(summary.content, model)

    def choose(lo: int, base: int) -> tuple[int, int]:
        """Walk whole rounds back from the end: (window start, tokens used including `base`).

        The newest round is always taken; the minimum recent window may use the whole budget;
        further rounds are added while they fit the target.
        """
        min_rounds = min_recent_rounds(msg_count)
        used, ws, rounds, acc = base, n, 0, 0
        for i in range(n - 1, lo - 1, -1):
            if i not in static_set:
                acc += pk.eff(i)
            if i == 0 or msgs[i].role == "user":
                limit = budget if (min_rounds is None or rounds < min_rounds) else target
                if rounds and used + acc > limit:
                    break
                used, ws, rounds, acc = used + acc, i, rounds + 1, 0
        return ws, used

    def fixed_tokens() -> int:
        return sum(pk.eff(i) for i in static) + REPLY_PRIMING

    fixed = fixed_tokens()
    triggered = True
    if ws_state >= 0 and lo == ws_state:
        used = fixed + summary_tokens + sum(pk.eff(i) for i in range(lo, n) if i not in static_set)
        ws = lo
        triggered = used >= trigger
    if triggered:
        ws, used = choose(lo, fixed + summary_tokens)
        if summary_tokens and used > budget:
            # a summary that crowds out the newest round is dropped; without it, what it covered may
            # be sent verbatim again (from the stored window start on)
            summary_tokens, lo = 0, max(ws_state, 0)
            ws, used = choose(lo, fixed)
    if used > budget:
        # emergency: compress oversized must-keeps too; if even that fails, report the numbers
        pk.must_compressed.update(i for i in must if toks[i] > oversize)
        fixed = fixed_tokens()
        summary_tokens, lo = 0, max(ws_state, 0)
        ws, used = choose(lo, fixed)
        if used > budget:
            raise ContextTooLargeError(needed=used, budget=budget, detail=MUST_KEEP_DETAIL)
    use_summary = summary_tokens > 0

    # room for a summary written now (the CLI): set aside before the window is final
    room = 0
    if summarizing and summarize_now is not None and _segments(cover_end + 1, ws, static):
        evicted_tokens = sum(sum(toks[a:b]) for a, b in _segments(cover_end + 1, ws, static))
        want = min(
            summary_target_tokens(evicted_tokens + summary_tokens, config) + _SUMMARY_OVERHEAD,
            math.floor(target * config.summary_max_share),
        )
        want = max(want, summary_tokens)
        if triggered:
            ws2, used2 = choose(lo, fixed + want)
            if used2 <= budget:
                ws, used, room = ws2, used2 - want + summary_tokens, want
        else:  # the window stays; the summary may only use what is left under the trigger
            room = min(want, trigger - 1 - used + summary_tokens)
        if room < _SUMMARY_OVERHEAD + 16:
            room = 0

    # --- assemble ---------------------------------------------------------------------------------
    out: list[PackedMessage] = []
    for i in static:
        if i >= ws:
            break
        out.append(_packed(pk, i))

    removed: list[str] = []
    span_from = 0  # removed[span_from:] are the evicted messages no summary covers yet
    for a, b in _segments(0, ws, static):
        if b <= cover_end + 1:
            span_from += b - a
        elif a <= cover_end:
            span_from += cover_end + 1 - a
        removed.extend([m.id for m in msgs[a:b]])
    evicted = _segments(cover_end + 1, ws, static) if summarizing else []
    span_ids = removed[span_from:] if summarizing else []
    new_summary: Summary | None = None
    summary_msg: PackedMessage | None = None
    if room and span_ids:
        span_msgs = [m for a, b in evicted for m in msgs[a:b]]
        previous = summary_body(summary.content) if (use_summary and summary is not None) else None
        prev_ids = tuple(summary.covered_ids) if (use_summary and summary is not None) else ()
        new_summary = _write_summary(
            summarize_now, span_msgs, previous=previous, prev_ids=prev_ids, room=room, model=model
        )
        if new_summary is not None:
            summary_msg = PackedMessage("system", new_summary.content, new_summary.covered_ids, "summary",
                                        new_summary.tokens or 0)
            span_ids, evicted = [], []
    if summary_msg is None and use_summary and summary is not None:
        summary_msg = PackedMessage(
            "system", summary.content, tuple(summary.covered_ids) or (summary.through_id,), "summary", summary_tokens
        )
    if summary_msg is not None:
        out.append(summary_msg)
    out.extend(_packed(pk, i) for i in range(ws, n))
    recalled = None
    if recall_source is not None and config.recall:
        recalled = _recall_into(out, recall_source, budget=budget, preference=preference, model=model,
                                drop_terms=recall_drop_terms)

    span: SummarySpan | None = None
    if span_ids:
        span = SummarySpan(
            after_id=summary.through_id if summary_ok and summary is not None else None,
            through_id=span_ids[-1],
            ids=tuple(span_ids),
            tokens=sum(sum(toks[a:b]) for a, b in evicted),
            chars=sum(_segment_chars(msgs, stored_chars, a, b) for a, b in evicted),
        )

    tokens_after = sum(p.tokens for p in out) + REPLY_PRIMING
    sent = len(out) - (1 if summary_msg is not None else 0) - (1 if recalled is not None else 0)
    stats = dict(base_stats)
    stats.update(
        optimization_applied=True,
        strategy_chosen=decision.choice,
        strategy_reason=decision.reason,
        scores=decision.as_dict(),
        tokens_after=tokens_after,
        tokens_saved=stats["tokens_before"] - tokens_after,
        messages_after=len(out),
        messages_removed=max(0, msg_count - sent),
        removed_ids=removed,
        summary_needed=span is not None,
        summary_generated=new_summary is not None,
        summary_used=summary_msg is not None,
        triggered=triggered,
        window_start=msgs[ws].id,
        compressed_ids=[p.source_ids[0] for p in out if p.origin == "compressed"],
        recall_ids=list(recalled.source_ids) if recalled else [],
        recall_hit_ids=list(recalled.hit_ids) if recalled else [],
        recall_terms=list(recalled.terms) if recalled else [],
        recall_tokens=recalled.tokens if recalled else 0,
    )
    return PackResult(
        messages=out,
        stats=stats,
        window_start=msgs[ws].id,
        summary_span=span,
        decision=decision,
        removed_ids=removed,
        new_summary=new_summary,
    )


def _recall_into(
    out: list[PackedMessage],
    source: RecallSource,
    *,
    budget: int,
    preference: str,
    model: str,
    drop_terms: Sequence[str],
) -> Recall | None:
    """Insert a recall block right before the newest user message, in the room the budget leaves."""
    newest = next((k for k in range(len(out) - 1, -1, -1) if out[k].role == "user"), -1)
    if newest < 0:
        return None
    room = min(RECALL_CAP[preference], budget - sum(p.tokens for p in out) - REPLY_PRIMING)
    context = next((out[k] for k in range(newest - 1, -1, -1) if out[k].role == "assistant"), None)
    shown = frozenset(i for p in out if p.origin != "summary" for i in p.source_ids)
    block = recall(
        text=content_text(out[newest].content),
        context=content_text(context.content) if context is not None else None,
        source=source,
        room=room,
        exclude_ids=shown,
        model=model,
        drop_terms=drop_terms,
    )
    if block is not None:
        out.insert(newest, PackedMessage("system", block.content, block.source_ids, "recall", block.tokens))
    return block


_SUMMARY_OVERHEAD = 40  # header line + system-message framing, set aside from a summary's room


def _find(msgs: list[Msg], msg_id: str) -> int:
    """Position of `msg_id`, searching from the end (the ids we look for are recent); -1 if absent."""
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].id == msg_id:
            return i
    return -1


def _system_tokens(content: str, model: str) -> int:
    return count_message({"role": "system", "content": content}, model=model)


def _packed(pk: _Packer, i: int) -> PackedMessage:
    m = pk.msgs[i]
    if pk.is_compressed(i):
        content, t = pk.compress(i)
        return PackedMessage(m.role, content, (m.id,), "compressed", t, m.name)
    return PackedMessage(m.role, m.content, (m.id,), "pinned" if m.pinned else "verbatim", pk.toks[i], m.name)


def _write_summary(
    summarize_now: SummarizeNow,
    span: list[Msg],
    *,
    previous: str | None,
    prev_ids: tuple[str, ...],
    room: int,
    model: str,
) -> Summary | None:
    """Run the inline summarizer and wrap its text with a header; None if it produced nothing that fits."""
    body = summarize_now(span, previous_summary=previous, target_tokens=room - _SUMMARY_OVERHEAD, model=model)
    covered = prev_ids + tuple(m.id for m in span)
    source_chars = sum(content_chars(m.content) for m in span) + (len(previous) if previous else 0)
    lines = body.split("\n") if body else []
    while lines:
        text = "\n".join(lines)
        header = summary_header(covered_messages=len(covered), source_chars=source_chars, summary_chars=len(text))
        content = f"{header}\n{text}"
        tokens = _system_tokens(content, model)
        if tokens <= room:
            return Summary(id="inline", content=content, through_id=span[-1].id, covered_ids=covered, tokens=tokens)
        lines.pop()
    return None


def _unchanged(msgs: list[Msg], toks: list[int], base_stats: dict[str, Any]) -> PackResult:
    out = [
        PackedMessage(m.role, m.content, (m.id,), "pinned" if m.pinned else "verbatim", t, m.name)
        for m, t in zip(msgs, toks, strict=True)
    ]
    tokens_after = sum(toks) + REPLY_PRIMING
    stats = dict(base_stats)
    stats.update(
        optimization_applied=False,
        strategy_chosen="none",
        strategy_reason="history is below the trigger; everything is sent unchanged",
        scores={},
        tokens_after=tokens_after,
        tokens_saved=stats["tokens_before"] - tokens_after,
        messages_after=len(out),
        messages_removed=0,
        removed_ids=[],
        summary_needed=False,
        summary_generated=False,
        summary_used=False,
        triggered=False,
        window_start=None,
        compressed_ids=[],
        recall_ids=[],
        recall_hit_ids=[],
        recall_terms=[],
        recall_tokens=0,
    )
    return PackResult(messages=out, stats=stats, window_start=None, summary_span=None, decision=None, removed_ids=[])
