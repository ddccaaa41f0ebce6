"""Fixtures shared by the page, browser and dashboard tests: two users, and no send rate limit."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user(username="ada", password="a long test password 1")


@pytest.fixture
def other_user(db):
    return get_user_model().objects.create_user(username="eve", password="a long test password 2")


@pytest.fixture
def no_rate_limit(settings):
    """The send rate limiter counts in the cache, which outlives a test: start clean, allow plenty."""
    cache.clear()
    settings.SEND_RATE_LIMIT_PER_MINUTE = 1000
    yield
    cache.clear()
