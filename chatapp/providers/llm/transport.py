"""HTTP clients for model endpoints: cached per target, redirects never followed, and (when private
addresses are not allowed) the endpoint's address checked again before each connection (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import threading
import time
import weakref
from collections import OrderedDict
from typing import Any

import httpx
import openai
from django.conf import settings
from django.core.exceptions import ValidationError

from chatapp.providers.llm.aio_transport import AiohttpTransport
from chatapp.providers.llm.types import NO_KEY, LLMTarget
from chatapp.providers.netguard import base_url_validate

_CLIENT_CACHE_SIZE = 32


# How long a host's connect-time address check is trusted: short, so a DNS record switched to a
# private address after the check is caught soon, yet a chat's requests do not each resolve again.
_ADDRESS_CHECK_TTL = 10.0


_ADDRESS_CHECK_CACHE_SIZE = 256


_sync_clients: OrderedDict[tuple, openai.OpenAI] = OrderedDict()


_sync_lock = threading.Lock()


# httpx async pools belong to the event loop that opened them, so async clients are cached per loop.
_async_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, OrderedDict[tuple, tuple[openai.AsyncOpenAI, AiohttpTransport]]
] = weakref.WeakKeyDictionary()


_closing: set[asyncio.Task] = set()


def _timeout(seconds: float) -> httpx.Timeout:
    # The read timeout applies between chunks, so a long streamed reply is fine while a silent
    # endpoint is not.
    return httpx.Timeout(seconds, connect=min(seconds, 10.0))


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
        "default_headers": {"OpenAI-Organization": openai.Omit(), "OpenAI-Project": openai.Omit()},
    }


class EndpointAddressRefused(httpx.ConnectError):
    """The endpoint's host resolves to an address this server may not call (checked at connect time)."""


_address_checks: OrderedDict[tuple[str, str, int], tuple[float, str | None]] = OrderedDict()


_address_checks_lock = threading.Lock()


def _address_check_cached(key: tuple[str, str, int]) -> tuple[bool, str | None]:
    """(known, refusal) for a host checked less than _ADDRESS_CHECK_TTL ago."""
    with _address_checks_lock:
        hit = _address_checks.get(key)
        if hit is None or hit[0] < time.monotonic():
            return False, None
        return True, hit[1]


def _address_check_run(key: tuple[str, str, int]) -> str | None:
    """Resolve and judge the host now (netguard's rules); the refusal in plain words, or None."""
    scheme, host, port = key
    shown_host = f"[{host}]" if ":" in host else host
    refusal: str | None = None
    try:
        base_url_validate(f"{scheme}://{shown_host}:{port}/", allow_private=False)
    except ValidationError as exc:
        if exc.code == "private_address":
            refusal = exc.messages[0]
        else:
            # Unresolvable now: not cached, and the connection attempt reports it in its own words.
            return None
    with _address_checks_lock:
        _address_checks[key] = (time.monotonic() + _ADDRESS_CHECK_TTL, refusal)
        _address_checks.move_to_end(key)
        while len(_address_checks) > _ADDRESS_CHECK_CACHE_SIZE:
            _address_checks.popitem(last=False)
    return refusal


def _address_check_key(request: httpx.Request) -> tuple[str, str, int] | None:
    if settings.ALLOW_PRIVATE_LLM_URLS:
        return None
    url = request.url
    return (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))


def _address_refused(request: httpx.Request, refusal: str | None) -> None:
    if refusal is not None:
        raise EndpointAddressRefused(refusal, request=request)


class _GuardedTransport(httpx.HTTPTransport):
    """Checks the host's resolved addresses before each request (see the module docstring)."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        key = _address_check_key(request)
        if key is not None:
            known, refusal = _address_check_cached(key)
            _address_refused(request, refusal if known else _address_check_run(key))
        return super().handle_request(request)


class _AsyncGuardedTransport(AiohttpTransport):
    """_GuardedTransport for the async client (over aiohttp: aio_transport says why): a resolution,
    when needed, runs off the event loop."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = _address_check_key(request)
        if key is not None:
            known, refusal = _address_check_cached(key)
            if not known:
                refusal = await asyncio.to_thread(_address_check_run, key)
            _address_refused(request, refusal)
        return await super().handle_async_request(request)


def _http_client() -> httpx.Client:
    return openai.DefaultHttpxClient(
        follow_redirects=False, transport=_GuardedTransport(limits=openai.DEFAULT_CONNECTION_LIMITS)
    )


def _async_http_client(transport: _AsyncGuardedTransport) -> httpx.AsyncClient:
    return openai.DefaultAsyncHttpxClient(follow_redirects=False, transport=transport)


def _sync_client(target: LLMTarget, *, timeout: float | None = None, max_retries: int = 0) -> openai.OpenAI:
    timeout = float(settings.LLM_TIMEOUT_SECONDS if timeout is None else timeout)
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


def _async_client(target: LLMTarget) -> openai.AsyncOpenAI:
    timeout = float(settings.LLM_TIMEOUT_SECONDS)
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
        _, (old, _) = clients.popitem(last=False)
        task = loop.create_task(old.close())
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
