"""Fixtures for the chat request path: users, a config on the fake endpoint, uvicorn (helpers:
tests/support/chat.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from chatapp.chat.models import Conversation
from tests.support.asgi_server import LiveASGI, asgi_server
from tests.support.chat import make_config

__all__ = ["asgi_server"]  # the shared fixture, used through uvicorn_server below


@pytest.fixture(autouse=True)
def _generous_rate_limit(settings):
    # Tests send many messages a minute (the root conftest clears the counter around each test).
    settings.SEND_RATE_LIMIT_PER_MINUTE = 1000


@pytest.fixture
def chat_user(db):
    return get_user_model().objects.create_user(username="ada", password="a long test password 1")


@pytest.fixture
def intruder(db):
    return get_user_model().objects.create_user(username="eve", password="a long test password 2")


@pytest.fixture
def echo_config(chat_user, fake_openai):
    return make_config(chat_user, fake_openai.base_url)


@pytest.fixture
def conversation(chat_user, echo_config):
    return Conversation.objects.create(owner=chat_user, llm_config=echo_config)


@pytest.fixture
def uvicorn_server(asgi_server: LiveASGI) -> LiveASGI:
    return asgi_server
