"""The strategy interface and the working state that strategies act on during one `pack` call.

A strategy has a `name` and one method, `apply(state)`, which reads and updates a `PackState`.
`pack` runs them in a fixed order (see `optimizer.packing`); each one owns one decision:

    summary     the passed summary takes its place in the layout (whatever the selector chose)
    truncate    the window: trigger, target, whole rounds, emergency compression
    summarize   what happens to messages evicted now: a span for a worker, or a summary written inline
    recall      quotes of old messages the newest one is about, in the room left

The state is a plain mutable object rather than values threaded through return types: the steps
share a dozen intermediate figures (window start, tokens used, the summary's room ...) and a later
step may revise an earlier one's (summarize moves the window to make room for its summary).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..layout import Layout, plan_layout, segments, snap_to_round
from ..recall import Recall, RecallSource
from ..selector import select_strategy
from ..tokens import REPLY_PRIMING, content_chars, content_text, count_message, count_text
from ..truncation import compress_text
from ..types import Counters, Decision, HistoryTotals, Msg, PackConfig, PackedMessage, Summary, SummarySpan

SummarizeNow = Callable[..., str]  # (span, *, previous_summary, target_tokens, model) -> summary body
CHARS_SCAN_LIMIT = 10_000  # the largest character threshold in the strategy scores


class Strategy(Protocol):
    """One step of packing: reads and updates the working state of one `pack` call."""

    name: str

    def apply(self, state: PackState) -> None: ...


@dataclass(slots=True)
class PackState:
    """One pack() call: its inputs, the layout, and what the strategies decided so far.

    Positions index `msgs`; -1 means "none".
    """

    msgs: list[Msg]
    toks: list[int]
    budget: int
    preference: str
    model: str
    config: PackConfig
    trigger: int
    target: int
    stored_chars: list[int | None] | None  # None when `history` totals stand in for the rest
    layout: Layout
    decision: Decision
    ws_state: int  # the stored window start, snapped to a round start
    summary: Summary | None = None
    summarize_now: SummarizeNow | None = None
    recall_source: RecallSource | None = None
    recall_fill: bool = False  # recall may take all the room left (see `recall.recall_cap`)
    yielded: int = 0  # tokens of target the window gave up for recall (see `begin`)
    # while the window yields to recall, the summary comes after the quotes (strategies.summarize)
    defer_summary: bool = False

    # the passed summary's place (strategy "summary"; truncate may drop it)
    lo: int = 0  # the window starts at or after this position
    cover_end: int = -1  # last position in view the passed summary covers
    summary_ok: bool = False  # the passed summary is consistent with the messages in view
    summary_tokens: int = 0  # > 0 while the passed summary is sent
    deferred_tokens: int = 0  # the passed summary's tokens while it waits for the room recall leaves
    # the window (strategy "truncate"; summarize may move it)
    fixed: int = 0  # tokens of the static layer as sent, plus the reply priming
    ws: int = 0
    used: int = 0
    triggered: bool = True
    # what summarize decided
    room: int = 0  # tokens set aside for a summary written now
    new_summary: Summary | None = None
    new_summary_msg: PackedMessage | None = None
    span: SummarySpan | None = None
    # assembled context
    out: list[PackedMessage] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    summary_msg: PackedMessage | None = None
    summary_at: int = 0  # the summary's place in `out`: after the static layer sent before the window
    recalled: Recall | None = None
    # compression: must-keeps are compressed only in an emergency; results are cached per position
    oversize: int = 1
    must_compressed: set[int] = field(default_factory=set)
    compressed: dict[int, tuple[int, str, int]] = field(default_factory=dict)  # position: (limit, text, tokens)
    # replies after the newest user message, when the budget cannot hold them beside the must-keeps
    # (truncate): a lower limit than `oversize` per position, or left out
    caps: dict[int, int] = field(default_factory=dict)
    dropped: set[int] = field(default_factory=set)

    @property
    def n(self) -> int:
        return len(self.msgs)

    @property
    def summarizing(self) -> bool:
        return self.decision.choice == "summarize"

    @property
    def use_summary(self) -> bool:
        return self.summary_tokens > 0

    def limit(self, i: int) -> int:
        """The most tokens message i may cost as sent before it is compressed."""
        return self.caps.get(i, self.oversize)

    def is_compressed(self, i: int) -> bool:
        if self.toks[i] <= self.limit(i):
            return False
        return i not in self.layout.must_keep or i in self.must_compressed

    def eff(self, i: int) -> int:
        """Tokens message i costs as sent (compressed size when it is sent compressed; 0 left out)."""
        if i in self.dropped:
            return 0
        return self.compress(i)[1] if self.is_compressed(i) else self.toks[i]

    def compress(self, i: int) -> tuple[str, int]:
        """(content, tokens) of message i cut down to its limit."""
        limit = self.limit(i)
        hit = self.compressed.get(i)
        if hit is None or hit[0] != limit:
            m = self.msgs[i]
            overhead = count_message(Msg(id=m.id, role=m.role, content="", name=m.name), model=self.model)
            text = content_text(m.content)
            if not isinstance(m.content, str):
                others = sum(1 for p in m.content if not (isinstance(p, dict) and p.get("type") == "text"))
                if others:
                    text += f"\n[{others} non-text part{'s' if others != 1 else ''} omitted]"
            body = compress_text(text, limit=max(0, limit - overhead), model=self.model)
            hit = (limit, body, overhead + count_text(body, model=self.model))
            self.compressed[i] = hit
        return hit[1], hit[2]

    def fixed_tokens(self) -> int:
        return sum(self.eff(i) for i in self.layout.static) + REPLY_PRIMING

    def packed(self, i: int) -> PackedMessage:
        m = self.msgs[i]
        if self.is_compressed(i):
            content, t = self.compress(i)
            return PackedMessage(m.role, content, (m.id,), "compressed", t, m.name)
        return PackedMessage(m.role, m.content, (m.id,), "pinned" if m.pinned else "verbatim", self.toks[i], m.name)

    def segment_chars(self, a: int, b: int) -> int:
        if self.stored_chars is not None:
            with contextlib.suppress(TypeError):  # some counts missing: measure instead
                return sum(self.stored_chars[a:b])  # type: ignore[arg-type]
        return _chars(self.msgs[a:b])

    def passed_summary_message(self) -> PackedMessage | None:
        s = self.summary
        if s is None:
            return None
        covered = tuple(s.covered_ids) or (s.through_id,)
        return PackedMessage("system", s.content, covered, "summary", self.summary_tokens)

    def assemble(self) -> None:
        """Static layer before the window, the summary layer, the window; and what was left out."""
        static = self.layout.static
        for i in static:
            if i >= self.ws:
                break
            self.out.append(self.packed(i))
        self.summary_at = len(self.out)
        self.removed = [m.id for a, b in segments(0, self.ws, static) for m in self.msgs[a:b]]
        self.removed += [self.msgs[i].id for i in sorted(self.dropped)]
        self.summary_msg = self.new_summary_msg
        if self.summary_msg is None and self.use_summary:
            self.summary_msg = self.passed_summary_message()
        if self.summary_msg is not None:
            self.out.append(self.summary_msg)
        self.out.extend(self.packed(i) for i in range(self.ws, self.n) if i not in self.dropped)


def begin(
    msgs: list[Msg],
    toks: list[int],
    *,
    budget: int,
    preference: str,
    model: str,
    config: PackConfig,
    trigger: int,
    target: int,
    window_start: str | None,
    history: HistoryTotals | None,
    counters: Counters,
    summarizer_available: bool,
    summary: Summary | None,
    summarize_now: SummarizeNow | None,
    recall_source: RecallSource | None,
    recall_fill: bool | None = None,
    yield_window: bool = True,
) -> PackState:
    """The working state before any strategy ran: layout, selector decision, stored window start.

    `yield_window`: when recall may fill the budget, the window's target drops to
    `config.fill_window_ratio` (`PackState.yielded` says by how much); pack() packs again without it
    when recall did not use that room."""
    layout = plan_layout(msgs, keep_first_user=config.keep_first_user)
    msg_count = history.messages if history is not None else len(msgs)
    stored_chars = [m.chars for m in msgs] if history is None else None
    if history is not None:
        chars, chars_at_least = history.chars, False
    else:
        chars, chars_at_least = _decision_chars(msgs, [m.chars for m in msgs])
    decision = select_strategy(
        message_count=msg_count,
        char_count=chars,
        preference=preference,
        summaries_so_far=counters.summaries_so_far,
        truncations_so_far=counters.truncations_so_far,
        summarizer_available=summarizer_available,
        chars_at_least=chars_at_least,
    )
    ws_state = -1 if window_start is None else snap_to_round(msgs, find(msgs, window_start), layout.newest_user)
    fill = window_start is None if recall_fill is None else recall_fill
    yielded = 0
    if yield_window and fill and recall_source is not None and config.recall:
        # No cached prefix to keep: the recent window needs only the conversation's flow, and the
        # room goes to quotes ranked by what the newest message is about (see PackConfig).
        lowered = min(target, max(1, math.floor(budget * config.fill_window_ratio)))
        target, yielded = lowered, target - lowered
    return PackState(
        msgs, toks, budget, preference, model, config, trigger, target, stored_chars, layout, decision,
        ws_state, summary, summarize_now, recall_source,
        recall_fill=fill, lo=max(ws_state, 0),
        oversize=max(1, math.floor(budget * config.oversize_share)), yielded=yielded, defer_summary=yielded > 0,
    )


def find(msgs: list[Msg], msg_id: str) -> int:
    """Position of `msg_id`, searching from the end (the ids we look for are recent); -1 if absent."""
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].id == msg_id:
            return i
    return -1


def _chars(msgs: Sequence[Msg]) -> int:
    """Characters of the messages' contents (stored `Msg.chars` when present)."""
    return sum([
        m.chars if m.chars is not None else len(m.content) if m.content.__class__ is str else content_chars(m.content)
        for m in msgs
    ])


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
