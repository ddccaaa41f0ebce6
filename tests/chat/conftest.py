"""Fixtures for the chat request path: users, a config on the fake endpoint, SSE helpers, uvicorn."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import AsyncClient

import optimizer
from chatapp.chat.crypto import secret_encrypt
from chatapp.chat.models import Conversation, LLMConfig, Message
from tests.support.asgi_server import LiveASGI, asgi_server

TEST_KEY = "sk-test-chat-KEY-1234"
__all__ = ["asgi_server"]  # the shared fixture, used through uvicorn_server below

# The uvicorn tests serve requests from other threads. An in-memory SQLite test database is shared
# between connections with table-level locks that fail at once instead of waiting (a write racing a
# read gets "database table is locked"), so on SQLite the test database is a file, as in production
# (WAL). tests/worker does the same; whichever conftest loads first decides the path.
_default_db = settings.DATABASES["default"]
if _default_db["ENGINE"].endswith("sqlite3") and not _default_db.get("TEST", {}).get("NAME"):
    _default_db.setdefault("TEST", {})["NAME"] = str(Path(tempfile.mkdtemp(prefix="chat-tests-")) / "test.sqlite3")


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


def make_config(owner, base_url: str, *, model: str = "fake-echo", window: int = 16_000, max_output: int = 500,
                name: str | None = None) -> LLMConfig:
    return LLMConfig.objects.create(
        owner=owner,
        name=name or f"{model} config",
        base_url=base_url,
        model=model,
        api_key_encrypted=secret_encrypt(TEST_KEY),
        api_key_last4=TEST_KEY[-4:],
        context_window=window,
        max_output_tokens=max_output,
        temperature=0.0,
    )


@pytest.fixture
def echo_config(chat_user, fake_openai):
    return make_config(chat_user, fake_openai.base_url)


@pytest.fixture
def conversation(chat_user, echo_config):
    return Conversation.objects.create(owner=chat_user, llm_config=echo_config)


def seed_messages(conversation: Conversation, count: int, *, model: str = "fake-echo", words: int = 12,
                  start: int = 0) -> list[int]:
    """Bulk-create `count` alternating user/assistant messages with stored counts (a fast, realistic seed)."""
    rows = []
    for i in range(start, start + count):
        role = "user" if i % 2 == 0 else "assistant"
        content = f"message {i} " + " ".join(f"word{(i * 7 + j) % 97}" for j in range(words))
        rows.append(
            Message(
                conversation=conversation,
                role=role,
                content=content,
                token_count=optimizer.count_message({"role": role, "content": content}, model=model),
                char_count=len(content),
            )
        )
    created = Message.objects.bulk_create(rows, batch_size=1000)
    ids = [m.pk for m in created] if created and created[0].pk else list(
        Message.objects.filter(conversation=conversation).order_by("-id").values_list("id", flat=True)[:count]
    )[::-1]
    Conversation.objects.filter(pk=conversation.pk).update(
        live_message_count=conversation.live_message_count + count,
        live_char_count=conversation.live_char_count + sum(r.char_count for r in rows),
        live_token_count=conversation.live_token_count + sum(r.token_count for r in rows),
    )
    conversation.refresh_from_db()
    return ids


def parse_sse_block(block: bytes) -> tuple[str, dict]:
    name = ""
    data: list[str] = []
    for line in block.decode().splitlines():
        if line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].lstrip())
    return name, json.loads("\n".join(data))


def sse_events(response: Any) -> Iterator[tuple[str, dict]]:
    """(event name, data) of an httpx streaming response's SSE body, as the events arrive (comments,
    such as keep-alives, are skipped)."""
    buffer = b""
    for chunk in response.iter_bytes():
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            if block.startswith(b"event:"):
                yield parse_sse_block(block)


@dataclass
class StreamResult:
    status: int
    headers: dict[str, str]
    events: list[tuple[str, dict]] = field(default_factory=list)
    body: Any = None
    # SSE comment lines (keep-alives), with the number of events received before each one.
    comments: list[tuple[int, str]] = field(default_factory=list)

    def named(self, name: str) -> list[dict]:
        return [data for event, data in self.events if event == name]

    @property
    def names(self) -> list[str]:
        return [event for event, _ in self.events]

    @property
    def text(self) -> str:
        return "".join(d["text"] for d in self.named("delta"))


OnEvent = Callable[[AsyncClient, str, dict], Awaitable[None]]


def post_stream(user, path: str, payload: Any = None, *, raw: str | None = None,
                on_event: OnEvent | None = None, accept: str | None = None) -> StreamResult:
    """POST through Django's ASGI request path (AsyncClient) and read the SSE body as it streams."""

    async def run() -> StreamResult:
        client = AsyncClient()
        await client.aforce_login(user)
        body = raw if raw is not None else json.dumps(payload if payload is not None else {})
        headers = {"Accept": accept} if accept is not None else None
        response = await client.post(path, data=body, content_type="application/json", headers=headers)
        headers = {k.lower(): v for k, v in response.headers.items()}
        if not response.streaming:
            return StreamResult(response.status_code, headers, body=json.loads(response.content or b"null"))
        result = StreamResult(response.status_code, headers)
        buffer = b""
        async for chunk in response.streaming_content:
            buffer += chunk
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                if block.startswith(b":"):
                    result.comments.append((len(result.events), block[1:].decode().strip()))
                    continue
                event = parse_sse_block(block)
                result.events.append(event)
                if on_event is not None:
                    await on_event(client, *event)
        return result

    return async_to_sync(run)()


def send(user, conversation: Conversation, content: str, **kwargs: Any) -> StreamResult:
    return post_stream(user, f"/api/conversations/{conversation.pk}/messages/", {"content": content}, **kwargs)


# --- a real uvicorn server over the test database (shared: tests/support/asgi_server.py) -----------


@pytest.fixture
def uvicorn_server(asgi_server: LiveASGI) -> LiveASGI:
    return asgi_server
