"""Plain data types of the optimizer's public API. Pure Python: no Django, no Celery.

Ids are opaque strings chosen by the caller (the web app uses str(Message.pk)); order is the order of
the sequence the caller passes, oldest first.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
PreferenceName = Literal["fast", "balanced", "quality"]
StrategyName = Literal["none", "truncate", "summarize"]
Origin = Literal["verbatim", "pinned", "compressed", "summary", "recall"]


@dataclass(frozen=True, slots=True)
class Msg:
    """One stored message as the optimizer sees it.

    `tokens` is the message's full chat-format count (3 per message + role + content [+1 for a name]),
    as returned by `optimizer.tokens.count_message`. Callers store it at write time and hand it back,
    so a request never re-tokenizes history; None means "count it now". `chars` likewise is the
    content's character count (`optimizer.tokens.content_chars`), handed back so that a long history's
    contents need not be read on the request path; None means "measure it now".
    """

    id: str
    role: Role
    content: str | list[dict[str, Any]]
    pinned: bool = False
    tokens: int | None = None
    name: str | None = None
    chars: int | None = None
    created_at: dt.datetime | None = None  # when it was said: recall quotes carry the date


@dataclass(frozen=True, slots=True)
class Summary:
    """The newest rolling summary: covers every non-static message from the start through `through_id`."""

    id: str
    content: str  # the summary text, header included, exactly as it will be sent
    through_id: str  # id of the last message it covers
    covered_ids: tuple[str, ...] = ()  # when known (the CLI knows; the app may pass only through_id)
    tokens: int | None = None


@dataclass(frozen=True, slots=True)
class HistoryTotals:
    """Totals over the whole live history, for callers that pass only part of it.

    The web app passes the static layer and the messages from `window_start` on, not the whole
    history; these totals (kept as running sums on the conversation) stand in for the rest.
    """

    messages: int
    chars: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Counters:
    summaries_so_far: int = 0
    truncations_so_far: int = 0


@dataclass(frozen=True, slots=True)
class PackConfig:
    reserved_output: int = 2000  # only used when the budget is derived from a context window
    safety_margin: int = 0
    trigger_ratio: float = 0.8
    target_ratio: float = 0.5
    fast_headroom: float = 0.1  # "fast" triggers and cuts this share of the budget lower (smallest context)
    keep_first_user: bool = True
    oversize_share: float = 0.25  # one message above this share of the budget is sent as head + tail
    summary_share: float = 0.15  # summary length target, share of the span's tokens
    summary_min_tokens: int = 64  # clamp of that target (design notes' dynamic length)
    summary_max_tokens: int = 1500
    summary_max_share: float = 0.35  # a summary takes at most this share of the target when packing
    recall: bool = True  # quote relevant old messages in the room the window leaves (optimizer.recall)
    # When recall may fill the budget (no prompt prefix cached from an earlier turn), the recent window
    # is cut to at most this share: relevance-ranked quotes reach more of what a question needs than
    # more recency does. Below every preference's target, so the window start it stores is stable too.
    fill_window_ratio: float = 0.4


DEFAULT_CONFIG = PackConfig()
DEFAULT_COUNTERS = Counters()


@dataclass(frozen=True, slots=True)
class Decision:
    choice: Literal["truncate", "summarize"]
    truncate_score: float
    summarize_score: float
    weighted_truncate: float
    weighted_summarize: float
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "truncate": self.truncate_score,
            "summarize": self.summarize_score,
            "weighted_truncate": self.weighted_truncate,
            "weighted_summarize": self.weighted_summarize,
        }


@dataclass(frozen=True, slots=True)
class PackedMessage:
    role: Role
    content: str | list[dict[str, Any]]
    source_ids: tuple[str, ...]
    origin: Origin
    tokens: int
    name: str | None = None  # the input message's `name`, when it had one


@dataclass(frozen=True, slots=True)
class SummarySpan:
    """Evicted messages not yet covered by a summary: what the next (rolling) summary must fold in.

    `after_id` is the last id the current summary covers (None: from the start); `through_id` the last
    evicted id. `ids` lists the span's ids among the messages the caller passed.
    """

    after_id: str | None
    through_id: str
    ids: tuple[str, ...] = ()
    tokens: int = 0
    chars: int = 0


@dataclass(frozen=True, slots=True)
class PackStats:
    """What one `pack` call did, for records, gauges and the CLI's `stats` (see `as_dict`)."""

    budget: int
    estimated: bool  # token figures come from a fallback encoding (unknown model)
    trigger_tokens: int
    target_tokens: int
    tokens_before: int  # the whole history as one request, reply priming included
    messages_before: int
    optimization_applied: bool
    strategy_chosen: StrategyName
    strategy_reason: str
    scores: Mapping[str, float]  # `Decision.as_dict()`; empty when nothing was optimized
    tokens_after: int
    tokens_saved: int
    messages_after: int
    messages_removed: int  # against the whole history, not just the messages in view
    removed_ids: tuple[str, ...]
    summary_needed: bool
    summary_generated: bool
    summary_used: bool
    triggered: bool
    window_start: str | None
    compressed_ids: tuple[str, ...]
    recall_ids: tuple[str, ...]
    recall_hit_ids: tuple[str, ...]
    recall_terms: tuple[str, ...]
    recall_tokens: int

    def as_dict(self) -> dict[str, Any]:
        """The `stats` dict of the JSON contract: field order, lists for sequences, a fresh copy each call."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        return out


@dataclass(slots=True)
class PackResult:
    messages: list[PackedMessage]
    info: PackStats
    window_start: str | None  # new window state to store (id of the first verbatim-window message)
    summary_span: SummarySpan | None
    decision: Decision | None = None
    removed_ids: list[str] = field(default_factory=list)
    new_summary: Summary | None = None  # set when pack(summarize_now=...) wrote a summary in this call

    @property
    def stats(self) -> dict[str, Any]:
        """`info` as the JSON contract's `stats` (a fresh copy on every read)."""
        return self.info.as_dict()


class ContextTooLargeError(ValueError):
    """The must-keep messages alone do not fit the budget, even after compressing oversized ones."""

    def __init__(self, *, needed: int, budget: int, detail: str = "") -> None:
        self.needed = needed
        self.budget = budget
        self.detail = detail
        super().__init__(
            f"the messages that must be kept need {needed:,} tokens but the budget is {budget:,}"
            + (f" ({detail})" if detail else "")
        )
