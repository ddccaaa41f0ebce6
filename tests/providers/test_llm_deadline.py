"""A whole-reply call (a summary, a title, a connection test) ends at its timeout, also when the endpoint
keeps the connection alive with whitespace before its JSON (as gateways do for a slow request): httpx's
read timeout bounds each wait for bytes, not the call."""

from __future__ import annotations

import time

import pytest

from chatapp.providers import llm
from tests.support.llm import make_target

MESSAGES = [{"role": "user", "content": "Summarize what we said."}]


def test_a_reply_kept_alive_with_whitespace_ends_at_the_calls_timeout(fake):
    started = time.monotonic()
    with pytest.raises(llm.LLMError) as info:
        # The reply comes after 4 s of a space every 0.1 s: no read ever waits 0.5 s.
        llm.llm_complete(target=make_target(fake.base_url, "drip-4000"), messages=MESSAGES, timeout=0.5)

    assert time.monotonic() - started < 2.0
    assert info.value.kind == "timeout" and info.value.retryable
    assert "within 0.5 seconds" in info.value.user_message


def test_a_reply_kept_alive_within_the_timeout_is_read_whole(fake):
    completion = llm.llm_complete(target=make_target(fake.base_url, "drip-300"), messages=MESSAGES, timeout=5)

    assert completion.text and completion.finish_reason == "stop"
