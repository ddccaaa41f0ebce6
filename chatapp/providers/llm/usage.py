"""A provider's usage figures as stored: read from an SDK object or from a streamed chunk's JSON, in
whatever shape the endpoint sent them."""

from __future__ import annotations

from typing import Any

from chatapp.providers.llm.types import Usage


def _field(value: Any, name: str) -> Any:
    """`name` of an SDK object or of the same thing as parsed JSON (a streamed chunk's usage)."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _usage_from(usage: Any) -> Usage:
    details = _field(usage, "prompt_tokens_details")
    cached = _field(details, "cached_tokens") if details is not None else None
    if cached is None:  # DeepSeek's own field for its prompt cache's hits
        cached = _field(usage, "prompt_cache_hit_tokens")
    return Usage(
        prompt_tokens=_token_count(_field(usage, "prompt_tokens")),
        completion_tokens=_token_count(_field(usage, "completion_tokens")),
        cached_tokens=None if cached is None else _token_count(cached),
    )


# The largest count the integer columns it is stored in hold on every database (PositiveIntegerField).
_TOKEN_COUNT_MAX = 2**31 - 1


def _token_count(value: Any) -> int:
    """A usage figure as stored: one that is not a count, or that no column holds (a proxy's garbage,
    which failed the reply's store), is no figure, 0."""
    try:
        count = max(0, int(value or 0))
    except (TypeError, ValueError, OverflowError):  # OverflowError: a count of 1e400, read as infinity
        return 0
    return count if count <= _TOKEN_COUNT_MAX else 0
