"""Fixtures for the app-layer tests (llm, crypto, netguard, config services, selectors)."""

from __future__ import annotations

import asyncio

import pytest

from chatapp.chat import llm

SECRET_KEY_VALUE = "sk-test-SECRETKEY-0123456789abcdef"


def make_target(base_url: str, model: str, *, api_key: str = SECRET_KEY_VALUE, max_output: int = 256) -> llm.LLMTarget:
    return llm.LLMTarget(
        base_url=base_url,
        model=model,
        api_key=api_key,
        temperature=0.7,
        max_output_tokens=max_output,
        context_window=8192,
        offline=False,
        label="Test endpoint",
    )


def run_stream(target: llm.LLMTarget, messages: list[dict], **kwargs) -> tuple[list, llm.LLMError | None]:
    """All events of one llm_stream call, and the LLMError it ended with (or None)."""

    async def consume():
        events: list = []
        try:
            async for event in llm.llm_stream(target=target, messages=messages, **kwargs):
                events.append(event)
        except llm.LLMError as exc:
            return events, exc
        return events, None

    return asyncio.run(consume())


@pytest.fixture
def fake(fake_openai):
    """The session's fake endpoint with an empty request log and fresh counters."""
    fake_openai.reset()
    return fake_openai


# No passwords: these tests never log in, and password hashing would dominate their run time.
@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob")
