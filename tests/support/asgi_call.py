"""Requests through an ASGI application, in-process, with the scope a server would give: a GET whose
client stays to the end (asgi_get), a POST whose client leaves at once (asgi_post_left). The
application runs on an event loop of its own, as under a server (under async_to_sync, asgiref would
run its thread-sensitive calls in the caller's thread)."""

from __future__ import annotations

import asyncio
from typing import Any


def _scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict:
    """The scope a server gives a request of `method` on `path` with `headers` (besides Host)."""
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
            "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "client": ("127.0.0.1", 50000), "server": ("testserver", 80),
            "headers": [(b"host", b"testserver"), *headers]}


def asgi_get(application: Any, path: str) -> int:
    """The status of a GET of `path`."""
    scope = _scope("GET", path, [])
    status: list[int] = []
    received: list[bool] = []

    async def call() -> None:
        ended = asyncio.Event()

        async def receive() -> dict:
            if not received:
                received.append(True)
                return {"type": "http.request", "body": b"", "more_body": False}
            await ended.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                ended.set()

        await application(scope, receive, send)

    asyncio.run(call())
    return status[0]


def asgi_post_left(application: Any, path: str, *, body: bytes, headers: list[tuple[bytes, bytes]]) -> list[dict]:
    """A POST whose client leaves as soon as the request is sent: the body is read, and the next
    receive (Django's disconnect listener, which starts with the view) says the client is gone.
    Returns what the application sent, once the replies it goes on writing without its client are
    stored (this loop ends with the call; a server's would not)."""
    scope = _scope("POST", path, [(b"content-type", b"application/json"),
                                  (b"content-length", str(len(body)).encode()), *headers])
    sent: list[dict] = []
    received: list[bool] = []

    async def receive() -> dict:
        if not received:
            received.append(True)
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    async def call() -> None:
        from chatapp.chat.reply_stream import unwatched_replies_wait

        await application(scope, receive, send)
        await unwatched_replies_wait()

    asyncio.run(call())
    return sent
