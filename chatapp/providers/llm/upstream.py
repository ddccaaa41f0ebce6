"""What a gateway (OpenRouter) says of the provider behind it, in its error's `metadata`: "Provider
returned error" alone tells the user nothing to do, the provider's own words (`raw`) do; a moderation
refusal names its `reasons`. The flagged input itself is the user's own text: never repeated."""

from __future__ import annotations

import json
from typing import Any

# The most of the upstream's words kept (the whole detail is cut at 300 characters after).
_RAW_CHARS = 200


def upstream_words(metadata: Any) -> str:
    """" (<provider>: <its words>)" from an error's metadata, or "" when it has neither."""
    if not isinstance(metadata, dict):
        return ""
    provider = metadata.get("provider_name")
    reasons = metadata.get("reasons")
    if isinstance(reasons, list) and reasons:
        said = ", ".join(str(reason) for reason in reasons[:5])
    else:
        said = _raw_words(metadata.get("raw"))
    parts = [part for part in (provider if isinstance(provider, str) else "", said) if part]
    return f" ({': '.join(parts)})" if parts else ""


def moderation_flagged(body: Any) -> bool:
    """Whether an error body (its `error` object) is a moderation's refusal of the input."""
    metadata = body.get("metadata") if isinstance(body, dict) else None
    return isinstance(metadata, dict) and ("flagged_input" in metadata or "reasons" in metadata)


def _raw_words(raw: Any) -> str:
    """The upstream's answer as passed on: its JSON error's message when it is one, else its text."""
    text = raw if isinstance(raw, str) else ""
    if text:
        try:
            raw = json.loads(text)
        except ValueError:
            raw = None
    if isinstance(raw, dict):
        inner = raw.get("error", raw)
        message = inner.get("message") if isinstance(inner, dict) else inner
        text = str(message or "") if message or not text else text
    return " ".join(text.split())[:_RAW_CHARS]
