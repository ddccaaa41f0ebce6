from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from rest_framework.test import APIClient

from chatapp.chat.models import Conversation, Message
from chatapp.providers.models import LLMConfig
from tests.support.accounts import other_user, token_client, user

__all__ = ["other_user", "user"]  # the shared accounts

PLAIN_KEY = "sk-test-PLAINKEY-never-shown-9z7Q"


def _drain(response) -> bytes:
    if not response.is_async:
        return b"".join(response.streaming_content)

    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    # The SSE views stream from an async iterator (ASGI); the sync test client hands it over as is.
    return async_to_sync(read)()


class RecordingClient(APIClient):
    """APIClient that keeps every response body, so a test can assert what never appears in any."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.bodies: list[bytes] = []

    def request(self, **kwargs):
        response = super().request(**kwargs)
        if getattr(response, "streaming", False):
            # Read the whole stream now; the test reads it back from .recorded_body.
            response.recorded_body = _drain(response)
        else:
            response.recorded_body = response.content
        self.bodies.append(response.recorded_body)
        return response


@pytest.fixture
def api(user) -> APIClient:
    """Token-authenticated client (no CSRF involved), keeping every body (RecordingClient)."""
    return token_client(user, RecordingClient())


@pytest.fixture
def other_api(other_user) -> APIClient:
    return token_client(other_user, RecordingClient())


def _make_conversation(owner, *, title: str = "Chat", messages: int = 0) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title=title)
    Message.objects.bulk_create(
        [
            Message(
                conversation=conversation,
                role=Message.Role.USER if i % 2 == 0 else Message.Role.ASSISTANT,
                content=f"message number {i}",
                token_count=8,
                char_count=len(f"message number {i}"),
            )
            for i in range(messages)
        ]
    )
    return conversation


def _make_config(owner, *, name: str = "Local", api_key: str = "") -> LLMConfig:
    from chatapp.providers.services import llm_config_create

    return llm_config_create(
        owner=owner,
        name=name,
        base_url="https://api.openai.com/v1",
        model="gpt-4o-mini",
        api_key=api_key,
    )


@pytest.fixture
def make_conversation(db):
    return _make_conversation


@pytest.fixture
def make_config(db):
    return _make_config


@pytest.fixture
def plain_key() -> str:
    return PLAIN_KEY


@pytest.fixture
def echo_config(api, fake_openai):
    response = api.post(
        "/api/configs/",
        {"name": "fake", "base_url": fake_openai.base_url, "model": "fake-echo", "api_key": "sk-fake-echo-0000"},
        format="json",
    )
    assert response.status_code == 201
    return response.json()
