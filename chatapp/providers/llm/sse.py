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
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import orjson

from chatapp.providers.llm.aio_transport import BODY_MAX_BYTES, BodyTooLarge
from chatapp.providers.llm.errors import KeepAlivesOnly, secret_scrub

logger = logging.getLogger(__name__)


# After [DONE] the body normally ends at once; one that stays open is given up (and the connection
# with it) after this long rather than holding the reply's end back.
DRAIN_SECONDS = 1.0


# The last event of a stream that ended with `[DONE]`: proof of a clean end that a cut connection
# cannot give, for servers that never set a finish_reason.
DONE: Any = object()


# The longest an endpoint's keep-alives alone (comments, `data: ping`) hold a reply open, or the call's
# timeout when longer: a gateway sends them while a model thinks in silence (OpenRouter's, for minutes
# with the slowest reasoning models), and a broken one sends them forever.
KEEPALIVES_MAX_SECONDS = 1800.0


async def sse_events(response: httpx.Response, *, timeout: float | None = None) -> AsyncIterator[Any]:
    """Each event's data as parsed JSON, until the end of the body or `[DONE]` (then DONE, last). An
    in-band error event (`{"error": ...}`, or llama.cpp's `error:` field) raises openai.APIError, as the
    SDK's stream does. A whole completion answered as JSON (a server that ignored `stream: true`) is read
    as one chunk. Keep-alives alone for KEEPALIVES_MAX_SECONDS, or `timeout` when longer, raise
    KeepAlivesOnly."""
    if response.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json":
        # Its size bounded by the transport (aio_transport.BodyReader).
        completion = _error_checked(_json_or_none(await response.aread()), response)
        if isinstance(completion, dict) and isinstance(completion.get("choices"), list):
            yield _as_chunk(completion)
            yield DONE
        return  # anything else: not a chat completion, which the caller reports
    lines = sse_lines(response.aiter_bytes())
    data: list[bytes] = []
    room = BODY_MAX_BYTES  # what the event's `data:` lines may still hold (sse_lines bounds each line)
    heard = time.monotonic()  # when the last event came
    quiet = None if timeout is None else max(timeout, KEEPALIVES_MAX_SECONDS)
    async for line in lines:
        if line:
            field, _, value = line.partition(b":")
            if field == b"data":
                data.append(value[1:] if value.startswith(b" ") else value)
                room -= len(value)
                if room < 0:
                    raise BodyTooLarge(f"a stream event past {BODY_MAX_BYTES:,} bytes")
            elif field == b"error":
                # llama.cpp's server (builds before late 2025) sends a streamed error in a field of its own,
                # then [DONE]: passed over, the reply ended empty and complete with nothing said.
                error = _json_or_none(value.strip())
                words = value.strip().decode("utf-8", "replace") or "An error occurred during streaming"
                _error_checked({"error": error if isinstance(error, dict) else {"message": words}}, response)
            else:
                _quiet_check(heard, quiet, response)  # a comment (`: keep-alive`), or a field nobody reads
            continue
        if not data:
            _quiet_check(heard, quiet, response)
            continue
        payload = b"\n".join(data)
        data, room = [], BODY_MAX_BYTES
        if payload.startswith(b"[DONE]"):
            await _drain(lines)
            yield DONE
            return
        event = _json_or_none(payload)
        if event is None:
            # An empty `data:` is no event by the SSE rules; a proxy's `data: ping` carries no text.
            if payload:
                # A proxy's notice may echo the request's Authorization header: logged without the key.
                key = response.request.headers.get("authorization", "").removeprefix("Bearer ")
                words = secret_scrub(payload.decode("utf-8", "replace"), key)
                logger.warning("model stream: passed over an event that is not JSON: %r", words[:80])
            _quiet_check(heard, quiet, response)
            continue
        heard = time.monotonic()
        yield _error_checked(event, response)


def _quiet_check(heard: float, quiet: float | None, response: httpx.Response) -> None:
    if quiet is not None and time.monotonic() - heard > quiet:
        raise KeepAlivesOnly(quiet, request=response.request)


def _error_checked(event: Any, response: httpx.Response) -> Any:
    if isinstance(event, dict) and event.get("error"):
        error = event["error"]
        message = error.get("message") if isinstance(error, dict) else None
        raise openai.APIError(message if isinstance(message, str) and message else
                              "An error occurred during streaming", request=response.request, body=error)
    return event


def _json_or_none(body: bytes) -> Any:
    try:
        return _parsed(body)
    except (ValueError, RecursionError):  # RecursionError: arrays nested past what the parser recurses into
        return None


def _as_chunk(completion: dict[str, Any]) -> dict[str, Any]:
    """A whole completion as the one stream chunk that says the same: each choice's message as its delta."""
    choices = [{**choice, "delta": choice.get("message")}
               for choice in completion["choices"] if isinstance(choice, dict)]
    return {**completion, "choices": choices}


async def sse_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The lines of a body read in `chunks`, without their ends (CRLF, LF or CR, as SSE allows),
    wherever the chunks break. Bytes, not text: a model streams a chunk per token or so, and
    httpx's text and line layers cost the event loop more than the split; a line end is one byte
    in UTF-8, never part of a character, so each line decodes whole."""
    pending: list[bytes] = []  # the unended line's pieces, joined once it ends (a long line stays linear)
    room = BODY_MAX_BYTES  # what the unended line may still grow by: an endless one must not fill memory
    async for chunk in chunks:
        if b"\n" not in chunk and b"\r" not in chunk and not (pending and pending[-1].endswith(b"\r")):
            pending.append(chunk)
            room -= len(chunk)
            if room < 0:
                raise BodyTooLarge(f"a stream line past {BODY_MAX_BYTES:,} bytes")
            continue
        lines = (b"".join(pending) + chunk).splitlines(keepends=True)
        # The last line is not ended yet, or ends with a CR whose LF may be in the next chunk.
        pending = [lines.pop()] if lines and not lines[-1].endswith(b"\n") else []
        room = BODY_MAX_BYTES - (len(pending[0]) if pending else 0)
        for line in lines:
            yield line.rstrip(b"\r\n")
    if pending:
        yield b"".join(pending).rstrip(b"\r\n")


def _parsed(payload: bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        # What orjson refuses and the standard library reads: half a surrogate pair (a model may
        # split one across two chunks), NaN, bytes that are not UTF-8 (replaced, as httpx decoded them).
        return json.loads(payload.decode("utf-8", "replace"))


async def _drain(lines: AsyncIterator[bytes]) -> None:
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in lines:
                pass
