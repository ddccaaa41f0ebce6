"""The design notes' helper API over plain OpenAI-style message dicts.

These wrap the core (`tokens`, `selector`, `pack`) for callers that hold ``{"role", "content"}``
dicts rather than `Msg` objects: a usage/urgency recommendation, a pre-flight safety check that
leaves room for tool calls, and a one-call "optimize this list" entry point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from .budget import trigger_tokens
from .packing import PackOptions, pack
from .selector import select_strategy
from .tokens import REPLY_PRIMING, content_chars, count_message, is_estimated
from .types import DEFAULT_CONFIG, DEFAULT_COUNTERS, Counters, Msg, PackConfig

ROLES = ("system", "user", "assistant", "tool")
TOKENS_PER_TOOL = 150  # a tool's JSON schema plus one call and its result header, a round estimate

# usage ratio (tokens / budget) below which each urgency applies; at or above 1.0 it is "critical"
URGENCY_LEVELS = ((0.6, "none"), (0.8, "low"), (0.9, "medium"), (1.0, "high"))


def _as_msg(m: Msg | Mapping[str, Any], index: int) -> Msg:
    if isinstance(m, Msg):
        return m
    role = m.get("role")
    if role not in ROLES:
        raise ValueError(f"message {m.get('id', index)!r}: unknown role {role!r}")
    if "content" not in m or m["content"] is None:
        raise ValueError(f"message {m.get('id', index)!r}: missing content")
    return Msg(
        id=str(m.get("id", index)),
        role=role,
        content=m["content"],
        pinned=bool(m.get("pinned", False)),
        tokens=m.get("tokens"),
        name=m.get("name"),
    )


def _tokens(msgs: Sequence[Msg], model: str) -> int:
    return REPLY_PRIMING + sum(m.tokens if m.tokens is not None else count_message(m, model=model) for m in msgs)


def urgency_for(ratio: float) -> str:
    """none < 0.6 <= low < 0.8 <= medium < 0.9 <= high < 1.0 <= critical (ratio of the budget used)."""
    for limit, name in URGENCY_LEVELS:
        if ratio < limit:
            return name
    return "critical"


def get_optimization_recommendation(
    messages: Sequence[Msg | Mapping[str, Any]],
    *,
    budget: int,
    model: str,
    preference: str,
    counters: Counters = DEFAULT_COUNTERS,
    summarizer_available: bool = True,
    config: PackConfig = DEFAULT_CONFIG,
) -> dict[str, Any]:
    """Usage ratio, urgency, whether optimization is needed and which strategy it would use."""
    msgs = [_as_msg(m, i) for i, m in enumerate(messages)]
    tokens = _tokens(msgs, model)
    ratio = tokens / budget if budget > 0 else float("inf")
    needed = budget <= 0 or tokens >= trigger_tokens(budget, config, preference=preference)
    decision = select_strategy(
        message_count=len(msgs),
        char_count=sum(content_chars(m.content) for m in msgs),
        preference=preference,
        summaries_so_far=counters.summaries_so_far,
        truncations_so_far=counters.truncations_so_far,
        summarizer_available=summarizer_available,
    )
    return {
        "tokens": tokens,
        "budget": budget,
        "usage_ratio": round(ratio, 4),
        "urgency": urgency_for(ratio),
        "needs_optimization": needed,
        "recommended_strategy": decision.choice if needed else "none",
        "reason": decision.reason,
        "scores": decision.as_dict(),
        "estimated": is_estimated(model),
    }


def check_context_safety(
    messages: Sequence[Msg | Mapping[str, Any]], max_tokens: int, tools_count: int = 0, *, model: str = "gpt-4o-mini"
) -> tuple[bool, str]:
    """Whether the messages fit `max_tokens` with room for `tools_count` tools (150 tokens each)."""
    msgs = [_as_msg(m, i) for i, m in enumerate(messages)]
    tokens = _tokens(msgs, model)
    reserve = max(0, tools_count) * TOKENS_PER_TOOL
    total = tokens + reserve
    tools = f" + {reserve:,} reserved for {tools_count} tool{'s' if tools_count != 1 else ''}" if reserve else ""
    if total <= max_tokens:
        share = 100 * total / max(1, max_tokens)
        return True, f"{tokens:,} tokens{tools} fit the limit of {max_tokens:,} ({share:.0f}%)"
    return False, f"{tokens:,} tokens{tools} exceed the limit of {max_tokens:,} by {total - max_tokens:,}"


def optimize_chat_context(
    messages: list[dict[str, Any]], *, budget: int, **options: Unpack[PackOptions]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Pack OpenAI-style dicts (optional keys: id, pinned, tokens, name); returns (messages to send, stats).
    `options` are `pack`'s, with its defaults.

    Ids default to the message's position. Raises ValueError on an unknown role or missing content,
    ContextTooLargeError when the must-keep messages cannot fit.
    """
    result = pack([_as_msg(m, i) for i, m in enumerate(messages)], budget=budget, **options)
    out = []
    for p in result.messages:
        d: dict[str, Any] = {"role": p.role, "content": p.content}
        if p.name:
            d["name"] = p.name
        out.append(d)
    return out, result.stats
