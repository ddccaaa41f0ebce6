"""Calling the model client directly in tests: a target on a test endpoint and one stream's events."""

from __future__ import annotations

import asyncio

from chatapp.providers import llm

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
