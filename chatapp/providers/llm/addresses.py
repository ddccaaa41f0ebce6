"""Where a model endpoint's connections may go: the addresses of one checked lookup, and nothing else.

A check that resolves the host and a connection that resolves it again can get two answers: a DNS
record switched to 127.0.0.1 between them (rebinding), or a lookup that fails for the check and
answers for the connection, would reach the server's own network. So both HTTP stacks dial only
what `host_addresses` returned: aiohttp (the streaming client) through `PinnedResolver`, httpcore
(the blocking client) through `PinnedBackend`. A lookup is trusted for a few seconds, so a chat's
requests do not each resolve again, and a failed one is never cached.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import OrderedDict
from typing import Any

import httpcore
import httpx
from aiohttp.abc import AbstractResolver, ResolveResult
from django.conf import settings
from django.core.exceptions import ValidationError

from chatapp.providers import netguard

# How long a host's checked lookup is used: short, so a record switched to a private address is
# caught soon, yet a chat's requests do not each resolve again.
_TTL = 10.0


_CACHE_SIZE = 256


_lookups: OrderedDict[tuple[str, int, bool], tuple[float, list[str] | str]] = OrderedDict()


_lock = threading.Lock()


class EndpointAddressRefused(httpx.ConnectError):
    """The endpoint's host resolves to an address this server may not call (checked at connect time)."""


class EndpointUnresolvable(OSError):
    """The endpoint's host did not resolve: the connection fails as one to an unknown host does."""


def host_addresses(host: str, port: int) -> list[str]:
    """The addresses a connection to `host`:`port` may use (netguard's rules unless
    ALLOW_PRIVATE_LLM_URLS). Raises EndpointAddressRefused or EndpointUnresolvable."""
    allow_private = bool(settings.ALLOW_PRIVATE_LLM_URLS)
    key = (host, port, allow_private)
    with _lock:
        hit = _lookups.get(key)
    if hit is None or hit[0] < time.monotonic():
        try:
            verdict: list[str] | str = netguard.host_addresses(host, port, allow_private=allow_private)
        except ValidationError as exc:
            if exc.code != "private_address":
                raise EndpointUnresolvable(exc.messages[0]) from None
            verdict = exc.messages[0]
        with _lock:
            _lookups[key] = (time.monotonic() + _TTL, verdict)
            _lookups.move_to_end(key)
            while len(_lookups) > _CACHE_SIZE:
                _lookups.popitem(last=False)
    else:
        verdict = hit[1]
    if isinstance(verdict, str):
        raise EndpointAddressRefused(verdict)
    return verdict


def host_lookups_forget() -> None:
    with _lock:
        _lookups.clear()


class PinnedResolver(AbstractResolver):
    """aiohttp's resolver: the checked addresses (the lookup runs off the event loop). A refusal
    leaves aiohttp as it came, so the SDK reports it as refused rather than as unreachable."""

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
                      ) -> list[ResolveResult]:
        addresses = await asyncio.to_thread(host_addresses, host, port)
        results = []
        for address in addresses:
            kind = socket.AF_INET6 if ":" in address else socket.AF_INET
            if family in (socket.AF_UNSPEC, kind):
                results.append(ResolveResult(hostname=host, host=address, port=port, family=kind, proto=0,
                                             flags=socket.AI_NUMERICHOST))
        if not results:
            raise EndpointUnresolvable(f"The host “{host}” has no address of the family asked for.")
        return results

    async def close(self) -> None:
        return None


class PinnedBackend(httpcore.SyncBackend):
    """httpcore's network backend: connects to the checked addresses in turn (TLS still verifies and
    names the host: httpcore passes the origin's name to the handshake, not the address)."""

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        try:
            addresses = host_addresses(host, port)
        except EndpointUnresolvable as exc:
            raise httpcore.ConnectError(str(exc)) from None
        failure = httpcore.ConnectError(f"No address of {host} could be reached.")
        for address in addresses:
            try:
                return super().connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                           socket_options=socket_options)
            except httpcore.ConnectError as exc:
                failure = exc
        raise failure
