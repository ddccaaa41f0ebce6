"""Fixtures for the model providers' tests (client, errors, quirks, crypto, SSRF guard, config services)."""

from __future__ import annotations

import pytest

from tests.support.accounts import other_user, user

__all__ = ["other_user", "user"]  # the shared accounts


@pytest.fixture
def fake(fake_openai):
    """The session's fake endpoint with an empty request log and fresh counters."""
    fake_openai.reset()
    return fake_openai
