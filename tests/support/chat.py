"""Helpers for tests of the chat request path: a model config on the fake endpoint, seeded messages, and
sending through Django's ASGI path with the SSE body read as it streams."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.test import AsyncClient

import optimizer
from chatapp.chat.branch_services import conversation_path_thread
from chatapp.chat.models import Conversation, Message
from chatapp.providers.crypto import secret_encrypt
from chatapp.providers.models import LLMConfig

TEST_KEY = "sk-test-chat-KEY-1234"


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
    conversation_path_thread(conversation_id=conversation.pk)  # one path, as sends would make it
    conversation.refresh_from_db()
    return ids


def summarized_chat(owner, *, covered_message_count: int = 4) -> tuple[Conversation, Message]:
    """A chat of six messages whose first four a summary covers: (the chat, the summary)."""
    conversation = Conversation.objects.create(owner=owner, title="Summarized")
    chat = [Message.objects.create(conversation=conversation, role=role, content=f"{role} {i}")
            for i in range(3) for role in ("user", "assistant")]
    summary = Message.objects.create(
        conversation=conversation, role="system", kind="summary",
        content="[Conversation summary — covers messages 1-4]\n\nThe first part.",
        covers_from_id=chat[0].pk, covers_through_id=chat[3].pk, covered_message_count=covered_message_count,
    )
    return conversation, summary


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
                on_event: OnEvent | None = None, accept: str | None = None,
                headers: dict[str, str] | None = None) -> StreamResult:
    """POST through Django's ASGI request path (AsyncClient) and read the SSE body as it streams."""

    async def run() -> StreamResult:
        client = AsyncClient()
        await client.aforce_login(user)
        body = raw if raw is not None else json.dumps(payload if payload is not None else {})
        sent = {**(headers or {}), **({"Accept": accept} if accept is not None else {})}
        response = await client.post(path, data=body, content_type="application/json", headers=sent or None)
        answered = {k.lower(): v for k, v in response.headers.items()}
        if not response.streaming:
            return StreamResult(response.status_code, answered, body=json.loads(response.content or b"null"))
        result = StreamResult(response.status_code, answered)
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


def send_stopped_elsewhere(user, conversation: Conversation, content: str) -> list[dict[str, Any]]:
    """Run a turn whose reply is stopped as it starts, the way Stop pressed in a tab served by another web
    process stops it: the row is marked stopped (message_stop); this process's flag is not set (stop_flag
    runs where the stop was made), so the stream learns of it by polling, or when its reply is stored.
    Returns the turn's events."""
    from chatapp.chat.chat_turn import chat_turn_start, chat_turn_stream
    from chatapp.chat.message_services import message_stop

    start = chat_turn_start(user=user, conversation=conversation, content=content)
    seen: list[dict[str, Any]] = []

    async def run() -> None:
        async for event in chat_turn_stream(start=start):
            seen.append(event)
            if event.get("event") == "start":
                reply_id = event["data"]["assistant_message"]["id"]
                await sync_to_async(message_stop)(message=await sync_to_async(Message.objects.get)(pk=reply_id))

    async_to_sync(run)()
    return seen


def chat_deleted_around(
    monkeypatch: Any, module: Any, name: str, *, conversation_id: int, before: bool = False
) -> None:
    """`module.name` runs as another tab deletes the chat: just after it (`before`: just before it), as a
    request that found the chat goes on between its statements."""
    real = getattr(module, name)

    def deleted_around(*args: Any, **kwargs: Any) -> Any:
        if before:
            Conversation.objects.filter(pk=conversation_id).delete()
        done = real(*args, **kwargs)
        if not before:
            Conversation.objects.filter(pk=conversation_id).delete()
        return done

    monkeypatch.setattr(module, name, deleted_around)
