"""The events of a streamed Chat Completions response, read to the end of its body.

Why not iterate the SDK's `AsyncStream`: it stops at `data: [DONE]` and closes the response before
the body's last chunk has been read, and httpx cannot hand a connection with an unread body back to
its pool. Every reply then opened a new connection to the provider (TCP and TLS: a round trip or two
before the first token, and the handshake's CPU). Here the request is still the SDK's (its retries,
headers and error types); only the body is read, by the Server-Sent Events rules the SDK follows
(`data:` lines joined by newlines, a blank line ends an event, `:` starts a comment), and after
`[DONE]` the rest of the body is drained briefly so the connection stays open for the next reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai

# After [DONE] the body normally ends at once; one that stays open is given up (and the connection
# with it) after this long rather than holding the reply's end back.
DRAIN_SECONDS = 1.0


async def sse_events(response: httpx.Response) -> AsyncIterator[Any]:
    """Each event's data as parsed JSON, until `[DONE]` or the end of the body. An in-band error
    event (`{"error": ...}`) raises openai.APIError, as the SDK's stream does."""
    lines = response.aiter_lines()
    data: list[str] = []
    async for line in lines:
        if line:
            field, _, value = line.partition(":")
            if field == "data":
                data.append(value[1:] if value.startswith(" ") else value)
            continue
        if not data:
            continue
        payload = "\n".join(data)
        data = []
        if payload.startswith("[DONE]"):
            await _drain(lines)
            return
        event = json.loads(payload)
        if isinstance(event, dict) and event.get("error"):
            error = event["error"]
            message = error.get("message") if isinstance(error, dict) else None
            raise openai.APIError(message if isinstance(message, str) and message else
                                  "An error occurred during streaming", request=response.request, body=error)
        yield event


async def _drain(lines: AsyncIterator[str]) -> None:
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in lines:
                pass
