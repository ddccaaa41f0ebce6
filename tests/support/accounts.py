"""Accounts for tests: two users and no send rate limit (fixtures shared by the page, browser, chat
and dashboard tests), and an API client holding a user's token."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

PASSWORD = "a long test password 1"  # `user`'s, for the tests that log in with it


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user(username="ada", password=PASSWORD)


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


def token_client(user, client: APIClient | None = None) -> APIClient:
    """`client` (a new APIClient by default) authenticated with `user`'s API token: no CSRF involved."""
    client = client if client is not None else APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client
