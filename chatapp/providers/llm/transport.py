"""HTTP clients for model endpoints: cached per target, redirects never followed, and connections
made only to addresses checked by the SSRF guard (addresses.py: DNS rebinding included).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import ipaddress
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import httpcore
import httpx
import openai

from chatapp.providers.llm.addresses import (
    EndpointAddressRefused,
    PinnedBackend,
    PinnedResolver,
    host_addresses,
)
from chatapp.providers.llm.aio_transport import ACCEPT_ENCODING, AiohttpTransport, BodyReader, tls_context
from chatapp.providers.llm.types import NO_KEY, LLMTarget

_CLIENT_CACHE_SIZE = 32


_sync_clients: OrderedDict[tuple, openai.OpenAI] = OrderedDict()


_sync_lock = threading.Lock()


# httpx async pools belong to the event loop that opened them, so async clients are cached per loop.
_async_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, OrderedDict[tuple, tuple[openai.AsyncOpenAI, AiohttpTransport]]
] = weakref.WeakKeyDictionary()


_closing: set[asyncio.Task] = set()


# The longest a connection is waited for (a call's own timeout when shorter): an address no machine
# answers at, or a firewall dropping the packets, is said so well before the model's timeout.
CONNECT_TIMEOUT_SECONDS = 10.0


def connect_seconds(seconds: float) -> float:
    """How long a call given `seconds` waits for its connection (errors.py names it)."""
    return min(seconds, CONNECT_TIMEOUT_SECONDS)


def _timeout(seconds: float) -> httpx.Timeout:
    # The read timeout applies between chunks, so a long streamed reply is fine while a silent
    # endpoint is not.
    return httpx.Timeout(seconds, connect=connect_seconds(seconds))


def _client_key(target: LLMTarget, timeout: float, max_retries: int) -> tuple:
    # The key is hashed so client caches never hold it as a dict key that could end up in a dump.
    key_hash = hashlib.sha256(target.api_key.encode()).hexdigest()
    return (target.base_url, key_hash, float(timeout), max_retries)


def _client_kwargs(target: LLMTarget, timeout: float, max_retries: int) -> dict[str, Any]:
    return {
        "base_url": target.base_url,
        "api_key": target.api_key or NO_KEY,
        "timeout": _timeout(timeout),
        "max_retries": max_retries,
        # Never forward the server operator's OpenAI organization/project to a user's endpoint.
        "default_headers": {"OpenAI-Organization": openai.Omit(), "OpenAI-Project": openai.Omit(),
                            # Only what the transports inflate themselves, in bounded pieces.
                            "Accept-Encoding": ACCEPT_ENCODING},
    }


class _GuardedTransport(httpx.HTTPTransport):
    """httpx's transport over a pool that dials only checked addresses (addresses.PinnedBackend)."""

    def __init__(self, *, limits: httpx.Limits) -> None:
        super().__init__(limits=limits)
        # The pool httpx would make, with the network backend it has no parameter for.
        self._pool = httpcore.ConnectionPool(
            ssl_context=tls_context(), max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections, keepalive_expiry=limits.keepalive_expiry,
            network_backend=PinnedBackend(),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        _address_written_check(request)
        started = time.monotonic()
        response = super().handle_request(request)
        # This client's calls take whole replies (a summary, a title, a connection test), whose timeout is
        # the call's: the read timeout alone bounds each wait for bytes, and an endpoint that keeps a slow
        # request alive with whitespace before its JSON held a summary's worker past its job's lease.
        read = request.extensions.get("timeout", {}).get("read")
        if read is not None:
            response.stream = _DeadlineStream(response.stream, request=request, deadline=started + read)
        reader = BodyReader.for_headers(response.headers.get("content-type", ""),
                                        response.headers.pop("content-encoding", ""))
        if reader is not None:  # inflated and bounded as the async client's bodies (aio_transport)
            response.stream = _ReadBody(response.stream, reader)
        return response


class _DeadlineStream(httpx.SyncByteStream):
    """A response body that ends with httpx's ReadTimeout (the SDK's APITimeoutError) once `deadline`
    (time.monotonic()) has passed: at most one read timeout after it, the longest a read waits."""

    def __init__(self, stream: Any, *, request: httpx.Request, deadline: float) -> None:
        self._stream = stream
        self._request = request
        self._deadline = deadline

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            if time.monotonic() > self._deadline:
                raise httpx.ReadTimeout("the reply took longer than its timeout", request=self._request)
            yield chunk

    def close(self) -> None:
        self._stream.close()


class _ReadBody(httpx.SyncByteStream):
    def __init__(self, stream: httpx.SyncByteStream | httpx.AsyncByteStream, reader: BodyReader) -> None:
        self.stream, self.reader = stream, reader

    def __iter__(self) -> Iterator[bytes]:
        for data in self.stream:  # type: ignore[union-attr]  # the sync transport's: a sync stream
            yield from self.reader.take(data)

    def close(self) -> None:
        self.stream.close()  # type: ignore[union-attr]


class _AsyncGuardedTransport(AiohttpTransport):
    """The async client's transport (over aiohttp: aio_transport says why), resolving names through
    addresses.PinnedResolver."""

    def __init__(self, *, limits: httpx.Limits) -> None:
        super().__init__(limits=limits, resolver=PinnedResolver)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        _address_written_check(request)
        return await super().handle_async_request(request)


def _address_written_check(request: httpx.Request) -> None:
    """An address written in the URL, judged before each request: aiohttp never resolves it, and a
    pooled connection may have been opened under another rule. No lookup: a name is judged where
    it is resolved, when a connection is opened."""
    try:
        ipaddress.ip_address(request.url.host)
    except ValueError:
        return
    try:
        host_addresses(request.url.host, request.url.port or (443 if request.url.scheme == "https" else 80))
    except EndpointAddressRefused as exc:
        raise EndpointAddressRefused(str(exc), request=request) from None


def _http_client() -> httpx.Client:
    return openai.DefaultHttpxClient(
        follow_redirects=False, transport=_GuardedTransport(limits=openai.DEFAULT_CONNECTION_LIMITS)
    )


def _async_http_client(transport: _AsyncGuardedTransport) -> httpx.AsyncClient:
    return openai.DefaultAsyncHttpxClient(follow_redirects=False, transport=transport)


def _sync_client(target: LLMTarget, *, timeout: float, max_retries: int = 0) -> openai.OpenAI:
    key = _client_key(target, timeout, max_retries)
    with _sync_lock:
        client = _sync_clients.get(key)
        if client is not None:
            _sync_clients.move_to_end(key)
            return client
        client = openai.OpenAI(**_client_kwargs(target, timeout, max_retries), http_client=_http_client())
        _sync_clients[key] = client
        while len(_sync_clients) > _CLIENT_CACHE_SIZE:
            _, old = _sync_clients.popitem(last=False)
            old.close()
        return client


def _async_client(target: LLMTarget, *, timeout: float) -> openai.AsyncOpenAI:
    key = _client_key(target, timeout, 0)
    loop = asyncio.get_running_loop()
    # Clients of a closed loop can never be used again (and may keep it alive through their pools).
    for old_loop in [other for other in list(_async_clients) if other.is_closed()]:
        _loop_clients_forget(_async_clients.pop(old_loop, None))
    clients = _async_clients.setdefault(loop, OrderedDict())
    cached = clients.get(key)
    if cached is not None:
        clients.move_to_end(key)
        return cached[0]
    transport = _AsyncGuardedTransport(limits=openai.DEFAULT_CONNECTION_LIMITS)
    client = openai.AsyncOpenAI(**_client_kwargs(target, timeout, 0), http_client=_async_http_client(transport))
    clients[key] = (client, transport)
    while len(clients) > _CLIENT_CACHE_SIZE:
        # The transport only, which waits for the requests still running (a reply streaming): the
        # client itself, once closed, would refuse the next attempt of a request that holds it.
        _, (_, old_transport) = clients.popitem(last=False)
        task = loop.create_task(old_transport.aclose())
        _closing.add(task)
        task.add_done_callback(_closing.discard)
    return client


def _loop_clients_forget(clients: OrderedDict[tuple, tuple[openai.AsyncOpenAI, AiohttpTransport]] | None) -> None:
    for _, transport in (clients or {}).values():
        transport.loop_closed()


@atexit.register
def _async_clients_forget() -> None:
    # The server's loop has ended by now: its sessions cannot be closed, only let go of quietly (the
    # clients stay cached, so their sockets last until the interpreter ends, as before).
    for clients in list(_async_clients.values()):
        _loop_clients_forget(clients)
