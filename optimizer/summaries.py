"""Summaries: the header, the prompt for a model-written summary, and an extractive summarizer.

Summaries roll: each one folds the previous summary plus the newly evicted span, so the cost of
summarizing does not grow with the length of the history.

The prompt's length target follows the design notes: a share of the span (15 % by default), clamped
to a minimum and a maximum, with instructions tiered by span size (brief gist / key points / topics,
decisions and details). It asks for the sections whose loss users notice most after a compaction:
facts about the user, decisions, open tasks, identifiers and numbers.

The extractive summarizer needs no model. It is used offline, by the CLI, and as the fallback when a
model summary fails. It scores sentences (and the lines a user flagged inside pasted logs) by the
signals of a statement of fact: a first-person or named subject, a naming verb, a concrete value
(numbers, names, code, quoted strings), an explicit correction or reminder; questions and generic
advice score low. Within the token target it keeps the best sentences, newest first among equals
(so a correction beats the value it corrects), and prints them in conversation order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .budget import target_tokens
from .recall import format_date
from .tokens import content_text, count_text, message_tokens
from .truncation import FLAGGED_LINE
from .types import DEFAULT_CONFIG, Msg, PackConfig

HEADER_PREFIX = "[Conversation summary"
_SHORT_SPAN = 1_500  # span tokens below which a brief gist is enough
_LONG_SPAN = 8_000  # span tokens above which the summary is organised by topic


def summary_header(
    *,
    covered_messages: int,
    source_chars: int,
    summary_chars: int,
    first_label: str | None = None,
    last_label: str | None = None,
) -> str:
    """First line of a summary message, e.g. ``[Conversation summary — covers 48 messages, 21,300 → 1,050 characters]``.

    With labels: ``[Conversation summary — covers messages 1\u201348, ...]``.
    """
    if first_label is not None and last_label is not None:
        what = f"covers messages {first_label}\u2013{last_label}"
    else:
        what = f"covers {covered_messages:,} message{'s' if covered_messages != 1 else ''}"
    return f"{HEADER_PREFIX} — {what}, {source_chars:,} → {summary_chars:,} characters]"


def summary_body(content: str) -> str:
    """A summary message's text without its header line (a first line that opens with the header's
    prefix and closes its bracket), stripped: what its "→ N characters" counts."""
    if content.startswith(HEADER_PREFIX):
        head, _, rest = content.partition("\n")
        if head.rstrip().endswith("]"):
            return rest.strip()
    return content.strip()


SUMMARY_HEADER_TOKENS = 40  # header line + system-message framing around a summary body


def summary_room(budget: int, config: PackConfig = DEFAULT_CONFIG) -> int:
    """Most tokens a summary body may take under a chat `budget`: `summary_max_share` of the target,
    less the header line, and never below `summary_min_tokens`."""
    share = math.floor(target_tokens(budget, config) * config.summary_max_share)
    return max(config.summary_min_tokens, share - SUMMARY_HEADER_TOKENS)


def summary_target_tokens(span_tokens: int, config: PackConfig = DEFAULT_CONFIG) -> int:
    """Length target of a summary of `span_tokens`: summary_share of it, clamped to [min, max]."""
    raw = math.ceil(span_tokens * config.summary_share)
    return max(config.summary_min_tokens, min(config.summary_max_tokens, raw))


@dataclass(frozen=True, slots=True)
class SummaryPrompt:
    """An OpenAI-style request for a model-written summary."""

    messages: list[dict[str, str]]
    target_tokens: int
    max_tokens: int
    tier: str  # "brief" | "key_points" | "detailed"


_TIER_INSTRUCTIONS = {
    "brief": "Write a brief gist of this part of the conversation in a few sentences.",
    "key_points": "Write the key points of this part of the conversation as short bullet points.",
    "detailed": (
        "Organise the summary by topic. For each topic give the decisions taken, the important details "
        "and anything still open, as short bullet points."
    ),
}

_SECTIONS = (
    "Use these sections, leaving out any that would be empty:\n"
    "## Facts about the user (names, people, places, preferences, constraints; latest value when corrected)\n"
    "## Decisions\n"
    "## Open tasks and questions\n"
    "## Identifiers and numbers (exact: ids, names, ports, dates, amounts, commands, passwords the user shared)\n"
    "## Other context"
)


def _transcript(span: Sequence[Msg]) -> str:
    """The span as the summarizer reads it: each message after its speaker, and a line for each new day
    before its first message, so that what happened keeps its date (recall's date format)."""
    parts: list[str] = []
    day = None
    for m in span:
        if m.created_at is not None and (said := format_date(m.created_at)) != day:
            parts.append(f"[{said}]")
            day = said
        parts.append(f"{m.role.upper()}: {content_text(m.content)}")
    return "\n\n".join(parts)


# Chats run over weeks: "yesterday" in a summary read a month later points at the wrong day.
_DATES = (
    "The messages are under the date they were written ([Mon 8 May 2023]). Give each event, plan and "
    "decision you keep its date, and write a relative time (yesterday, last week, next Friday) as the "
    "date it means, counted from the day it was said."
)


def build_summary_prompt(
    span: Sequence[Msg],
    *,
    previous_summary: str | None,
    instructions: str = "",
    model: str,
    config: PackConfig = DEFAULT_CONFIG,
    budget: int | None = None,
) -> SummaryPrompt:
    """Build the summarizing request for `span` (rolling: the previous summary is folded in).

    The target is `summary_share` of the span's tokens (plus the previous summary's), clamped to
    [summary_min_tokens, summary_max_tokens]; `max_tokens` leaves the model some slack above it.
    `instructions` are the user's own wishes (e.g. from a manual "compact" request). With the chat's
    `budget`, the target is also capped at the summary's share of the packing target (`summary_room`).
    """
    span_tokens = sum(message_tokens(m, model=model) for m in span)
    if previous_summary:
        span_tokens += count_text(summary_body(previous_summary), model=model)
    target = summary_target_tokens(span_tokens, config)
    if budget is not None:
        # capped to its share of the budget, so that at a cut it never crowds out the recent window
        target = min(target, summary_room(budget, config))
    tier = "brief" if span_tokens < _SHORT_SPAN else "key_points" if span_tokens < _LONG_SPAN else "detailed"
    dates = f"{_DATES}\n" if any(m.created_at is not None for m in span) else ""
    system = (
        "You compress chat history so that an assistant can continue the conversation without the "
        "original messages. Keep every concrete fact exactly as stated: names, numbers, dates, "
        "identifiers, commands. When a fact was corrected later, keep only the corrected value. "
        f"{_TIER_INSTRUCTIONS[tier]}\n{_SECTIONS}\n"
        f"{dates}"
        f"Aim for about {target} tokens. Write the summary only, no preamble."
    )
    if instructions.strip():
        system += f"\nThe user asked: {instructions.strip()}"
    parts = []
    if previous_summary:
        parts.append(
            "Summary of the conversation so far (fold it into the new summary):\n" + summary_body(previous_summary)
        )
    parts.append("Messages to summarize:\n" + _transcript(span))
    return SummaryPrompt(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}],
        target_tokens=target,
        max_tokens=int(target * 1.5) + 64,
        tier=tier,
    )


# --- extractive summarizer -------------------------------------------------------------------------

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[`A-Z0-9])|\n+")
_FENCE = "```"
_FIRST_PERSON = re.compile(r"\b(?:my|our|mine|ours|I|I'm|I've|I'd|me|we|we're|we've|us)\b", re.I)
_NAMING = re.compile(r"\b(?:is|are|was|were|called|named|name's|means|equals|listens|set to|runs? on)\b", re.I)
_CORRECTION = re.compile(
    r"\b(?:correction|actually|update[ds]?|changed|renamed|revised|moved|slipped|misspoke|instead|"
    r"no longer|not the|now|new)\b",
    re.I,
)
_REMINDER = re.compile(r"\b(?:remember|note|by the way|heads up|fyi|important|don't forget|keep in mind)\b", re.I)
_NUMBER = re.compile(r"\d")
_CODE = re.compile(r"`[^`]+`|\"[^\"]{2,40}\"|\b[\w]+[-_][\w-]+\b")
_PROPER = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}\b")
_RECOMMEND = re.compile(r"\b(?:you want|I'd (?:set|use|pick|go)|I recommend|we decided|decided|agreed|use)\b", re.I)
_ACK = re.compile(r"^(?:noted|thanks|thank you|ok|okay|sure|great|good question)\b", re.I)
_WS = re.compile(r"\s+")


def _units(msg: Msg) -> tuple[str, ...]:
    """Sentences of a message; for pasted blocks only the lines a person flagged."""
    return _text_units(content_text(msg.content))


@lru_cache(maxsize=1024)
def _text_units(text: str) -> tuple[str, ...]:
    # cached: the CLI and rolling summaries see the same messages again and again
    out: list[str] = []
    in_fence = False
    for block in text.split("\n"):
        if block.strip().startswith(_FENCE):
            in_fence = not in_fence
            continue
        if in_fence:
            if FLAGGED_LINE.search(block):
                out.append(block.strip())
            continue
        out.extend(s.strip() for s in _SENTENCE_SPLIT.split(block) if s and s.strip())
    return tuple(out)


# (signal, weight) of a statement of fact, in the order they are added up
_SIGNALS: tuple[tuple[re.Pattern[str], float], ...] = (
    (FLAGGED_LINE, 4),
    (_FIRST_PERSON, 2),
    (_NAMING, 1.5),
    (_CORRECTION, 2.5),
    (_REMINDER, 2),
    (_NUMBER, 1.5),
    (_CODE, 1.5),
    (_RECOMMEND, 1),
)


@lru_cache(maxsize=16384)
def _score(sentence: str, role: str) -> float:
    if _ACK.match(sentence) and len(sentence) < 40:
        return -5.0
    score = 0.0
    question = sentence.rstrip().endswith("?")
    if question:
        score -= 4
    for pattern, weight in _SIGNALS:
        if pattern.search(sentence):
            score += weight
    score += min(2, len(_PROPER.findall(sentence)))
    if role == "user":
        score += 1
    words = sentence.count(" ") + 1
    if words > 30:
        score -= (words - 30) / 10
    return score


def _norm(sentence: str) -> str:
    return _WS.sub(" ", sentence.lower()).strip()


def extractive_summary(
    span: Sequence[Msg], *, previous_summary: str | None, target_tokens: int, model: str
) -> str:
    """Summarize `span` (plus the previous summary's lines) without a model, in at most `target_tokens`.

    Returns the body only (no header); each kept sentence on its own line, prefixed by who said it.
    Deterministic; runs in time linear in the span's length.
    """
    candidates = _candidates(span, previous_summary)
    if not candidates or target_tokens <= 0:
        return ""
    chosen = _best_lines(candidates, target_tokens, model)
    while chosen:
        text = _lines_under_days(chosen)
        if count_text(text, model=model) <= target_tokens:  # joins can merge tokens differently
            return text
        chosen.pop()  # the weakest line goes first
    return ""


_Line = tuple[float, int, str, str]  # (score, position, text, the day it was said or "") of a candidate line
# The line `_transcript` and this summary put before a day's first message or fact.
_DAY_LINE = re.compile(r"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{1,2} [A-Z][a-z]+ \d{4}\]")


def _lines_under_days(chosen: list[_Line]) -> str:
    """The chosen lines in order, each day's under a line naming it (a fact read later keeps its date,
    and "yesterday" in it stays readable)."""
    out: list[str] = []
    day = ""
    for _, _, line, said in sorted(chosen, key=lambda c: c[1]):
        if said and said != day:
            out.append(f"[{said}]")
            day = said
        out.append(line)
    return "\n".join(out)


def _candidates(span: Sequence[Msg], previous_summary: str | None) -> list[_Line]:
    """(score, position, line) of every distinct sentence: the previous summary's lines, then the span's."""
    candidates: list[_Line] = []
    seen: set[str] = set()
    pos = 0
    day = ""
    if previous_summary:
        for line in summary_body(previous_summary).split("\n"):
            line = line.strip()
            if _DAY_LINE.fullmatch(line):  # the day of the lines below it, not a fact to rank
                day = line[1:-1]
            elif line and _norm(line) not in seen:
                seen.add(_norm(line))
                # lines that survived an earlier round were already chosen once: a small bonus keeps them stable
                candidates.append((_score(line, "user") + 1, pos, line, day))
                pos += 1
    for msg in span:
        who = "User" if msg.role == "user" else "Assistant" if msg.role == "assistant" else msg.role.capitalize()
        said = format_date(msg.created_at) if msg.created_at is not None else ""
        for sentence in _units(msg):
            key = _norm(sentence)
            if len(key) < 12 or key in seen:
                continue
            seen.add(key)
            candidates.append((_score(sentence, msg.role), pos, f"{who}: {sentence}", said))
            pos += 1
    return candidates


def _best_lines(candidates: list[_Line], target_tokens: int, model: str) -> list[_Line]:
    """The lines that fit `target_tokens`, in rank order (best first)."""
    # best first; among equals the newer one (a correction beats the value it corrects)
    ranked = sorted(candidates, key=lambda c: (-c[0], -c[1]))
    chosen: list[_Line] = []
    days: set[str] = set()
    used = 0
    for score, position, line, said in ranked:
        if score <= 0 and chosen:
            break
        # a day's line is paid for by its first fact (the rendering may repeat it: the final count decides)
        cost = count_text(line, model=model) + 1 + (count_text(f"[{said}]", model=model) + 1
                                                     if said and said not in days else 0)
        if used + cost > target_tokens:
            continue
        chosen.append((score, position, line, said))
        days.add(said)
        used += cost
        if target_tokens - used < 8:
            break
    return chosen
