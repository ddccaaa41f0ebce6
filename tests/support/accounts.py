"""Accounts for tests: two users and no send rate limit (fixtures shared by the page, browser, chat
and dashboard tests), a user's new API key, and an API client holding one."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
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


def api_key_for(user) -> str:
    """The key of a new API token of `user`'s (as Settings creates one)."""
    from chatapp.chat.token_services import api_token_create

    # Read again: the service refuses a user object whose password is not the stored one.
    return api_token_create(user=get_user_model().objects.get(pk=user.pk), name="test", made_in="settings").key


def token_client(user, client: APIClient | None = None) -> APIClient:
    """`client` (a new APIClient by default) authenticated with a new API token of `user`'s: no CSRF involved."""
    client = client if client is not None else APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_key_for(user)}")
    return client
