"""Strategy selector: truncate or summarize, by the design notes' scoring, made inspectable.

truncate_score  = 20 base + 30 if <= 50 messages + 30 if <= 10,000 characters + 20 if truncations so far < 5
summarize_score = 20 base + 30 if >= 10 messages + 30 if >= 2,000 characters
                  + 20 if summaries so far < 3, else -50
Weights (truncate / summarize): fast 0.8 / 0.2, balanced 0.5 / 0.5, quality 0.2 / 0.8. A tie goes to
truncation, which costs nothing; without a summarizer the choice is always truncation.

One adjustment to the literal formula, to keep the documented outcomes: with 5 short messages and
the "quality" preference the literal scores are truncate 100 x 0.2 = 20 against summarize
(20 + 20) x 0.8 = 32 (under 2,000 characters) or (20 + 30 + 20) x 0.8 = 56 (over), i.e. "summarize"
either way, but the documented outcome is "truncate for every preference". The smallest change
that restores it reuses the formula's own threshold: summarizing is not eligible below 10 messages.
The price: a conversation of fewer than 10 (long) messages that outgrows its window is truncated,
not summarized (recall can still quote what it evicted).
"""

from __future__ import annotations

from typing import Literal

from .types import Decision

WEIGHTS: dict[str, tuple[float, float]] = {
    "fast": (0.8, 0.2),
    "balanced": (0.5, 0.5),
    "quality": (0.2, 0.8),
}
PREFERENCES = tuple(WEIGHTS)
SUMMARIZE_MIN_MESSAGES = 10


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def select_strategy(
    *,
    message_count: int,
    char_count: int,
    preference: str,
    summaries_so_far: int,
    truncations_so_far: int,
    summarizer_available: bool,
    chars_at_least: bool = False,
) -> Decision:
    """Score truncation and summarization for a conversation and pick one; raises ValueError on a bad preference.

    `chars_at_least` says `char_count` is only a lower bound (the caller stopped counting past the
    10,000-character threshold); the scores are the same, the reason says "more than".
    """
    if preference not in WEIGHTS:
        raise ValueError(f"unknown preference {preference!r} (expected one of {', '.join(PREFERENCES)})")
    t_score = 20.0 + (30 if message_count <= 50 else 0) + (30 if char_count <= 10_000 else 0)
    t_score += 20 if truncations_so_far < 5 else 0
    s_score = 20.0 + (30 if message_count >= 10 else 0) + (30 if char_count >= 2_000 else 0)
    s_score += 20 if summaries_so_far < 3 else -50
    wt, ws = WEIGHTS[preference]
    w_t, w_s = round(t_score * wt, 6), round(s_score * ws, 6)

    summaries = "1 summary" if summaries_so_far == 1 else f"{summaries_so_far:,} summaries"
    facts = (
        f"{preference} preference; {_plural(message_count, 'message')}, "
        f"{'more than ' if chars_at_least else ''}{_plural(char_count, 'character')}; {summaries} so far"
    )
    choice: Literal["truncate", "summarize"]
    if not summarizer_available:
        choice, why = "truncate", "no summarizer available"
    elif message_count < SUMMARIZE_MIN_MESSAGES:
        choice, why = "truncate", f"summarizing needs at least {SUMMARIZE_MIN_MESSAGES} messages"
    elif w_s > w_t:
        choice, why = "summarize", f"summarize {w_s:g} > truncate {w_t:g}"
    elif w_s == w_t:
        choice, why = "truncate", f"tie at {w_t:g} goes to truncation"
    else:
        choice, why = "truncate", f"truncate {w_t:g} > summarize {w_s:g}"
    return Decision(
        choice=choice,
        truncate_score=t_score,
        summarize_score=s_score,
        weighted_truncate=w_t,
        weighted_summarize=w_s,
        reason=f"{facts} → {choice} ({why})",
    )
