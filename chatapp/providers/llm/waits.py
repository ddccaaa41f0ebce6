"""The wait an endpoint names before a retry: its `Retry-After` header (seconds or an HTTP date), or
its words ("try again in 1.2s"), as whole seconds, and as the user is told it."""

from __future__ import annotations

import email.utils
import math
import re
from datetime import UTC, datetime

import openai

# The longest wait an endpoint is taken at its word for: a broken header's hundreds of digits were an
# infinite float, and the error's making raised (the chat's reply stayed "streaming").
LONGEST_WAIT_SECONDS = 86_400


def _whole_seconds(seconds: float) -> str:
    """A wait as whole seconds, from 1 (retry now is a second's wait, as every form's shortest) to a day."""
    return str(max(1, math.ceil(min(seconds, LONGEST_WAIT_SECONDS))))


def _retry_after(exc: openai.APIStatusError) -> str | None:
    value = (exc.response.headers.get("retry-after") or "").strip() if exc.response is not None else ""
    if value.isdecimal():
        # Past a dozen digits, more than a day (and past 4,300, more than int() reads).
        return _whole_seconds(int(value) if len(value) <= 12 else LONGEST_WAIT_SECONDS)
    try:  # the header's other form, an HTTP date (proxies and CDNs send it)
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return _whole_seconds((when - datetime.now(UTC)).total_seconds())


# A wait written in the words only: "Please try again in 1.2s" (OpenAI, Groq), "Please try again in 7m12s"
# (OpenAI's per-day limits), "Please retry in 42.5s" (Google), "retry after 6 seconds" (Azure).
_WAIT_LEAD = re.compile(r"(?i)\b(?:retry|try again)\s+(?:in|after)\s+")
_WAIT_PART = re.compile(r"(?i)\s*(\d+(?:\.\d+)?)\s*"
                        r"(hours?|h|milliseconds?|ms|minutes?|mins?|m|seconds?|secs?|s)(?![a-z])")
def _wait_in_words(detail: str) -> str | None:
    lead = _WAIT_LEAD.search(detail)
    if lead is None:
        return None
    seconds, at = 0.0, lead.end()
    while (part := _WAIT_PART.match(detail, at)) is not None:  # "7m12s": each unit in turn
        unit = part.group(2).lower()
        scale = 0.001 if unit == "ms" or unit.startswith("milli") else {"h": 3600.0, "m": 60.0}.get(unit[0], 1.0)
        seconds += float(part.group(1)) * scale
        at = part.end()
    if at == lead.end():
        return None
    return _whole_seconds(seconds)


def _wait_words(wait: str) -> str:
    """A wait the endpoint named (`_retry_after`'s whole seconds), as the user is told it."""
    return f"Wait {wait} second{'' if wait == '1' else 's'} and retry."
