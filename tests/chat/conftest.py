"""Fixtures for the chat request path: users, a config on the fake endpoint, uvicorn (helpers:
tests/support/chat.py)."""

from __future__ import annotations

import pytest

from chatapp.chat.models import Conversation
from tests.support.accounts import no_rate_limit, other_user, user
from tests.support.asgi_server import LiveASGI, asgi_server
from tests.support.chat import make_config

# The shared fixtures: asgi_server used through uvicorn_server, the accounts through the names below.
__all__ = ["asgi_server", "no_rate_limit", "other_user", "user"]


@pytest.fixture(autouse=True)
def _generous_rate_limit(no_rate_limit):
    """Tests send many messages a minute (see no_rate_limit)."""


@pytest.fixture
def chat_user(user):
    return user


@pytest.fixture
def intruder(other_user):
    return other_user


@pytest.fixture
def echo_config(chat_user, fake_openai):
    return make_config(chat_user, fake_openai.base_url)


@pytest.fixture
def conversation(chat_user, echo_config):
    return Conversation.objects.create(owner=chat_user, llm_config=echo_config)


@pytest.fixture
def uvicorn_server(asgi_server: LiveASGI) -> LiveASGI:
    return asgi_server
