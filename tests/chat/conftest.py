"""Fixtures for the chat request path: users, a config on the fake endpoint, uvicorn (helpers:
tests/support/chat.py)."""

from __future__ import annotations

import pytest

from chatapp.chat.models import Conversation
from tests.support.accounts import no_rate_limit, other_user, user
from tests.support.asgi_server import asgi_server
from tests.support.chat import make_config

# The shared fixtures, used by these names in the tests: the accounts (`user`, and `other_user` for
# someone else's requests) and the live server (`asgi_server`).
__all__ = ["asgi_server", "no_rate_limit", "other_user", "user"]


@pytest.fixture(autouse=True)
def _generous_rate_limit(no_rate_limit):
    """Tests send many messages a minute (see no_rate_limit)."""


@pytest.fixture
def echo_config(user, fake_openai):
    return make_config(user, fake_openai.base_url)


@pytest.fixture
def conversation(user, echo_config):
    return Conversation.objects.create(owner=user, llm_config=echo_config)
