"""Django's Redis cache, with one client and connection pool per process instead of one per request.

Django keeps a cache object per thread, and under ASGI a request's synchronous code runs in a thread
of its own: every request built a new client, a new connection pool and so a new connection (TCP,
then redis-py's handshake, which reads its own version from the installed package's metadata): the
send-rate check, three commands, took 7 % of a chat turn's samples on PostgreSQL with Redis (py-spy
on bench/turn_cpu.py), more than half of it making that connection. Here the cache objects of every
thread share one `RedisCacheClient` per location and options, and that client one `redis.Redis` per
pool; both are thread-safe (a command takes a connection from the pool and gives it back), and
redis-py's pool starts afresh in a forked child (it checks the process id).
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends import redis as django_redis
from django.utils.functional import cached_property

_lock = threading.Lock()
_clients: dict[tuple[tuple[str, ...], str], django_redis.RedisCacheClient] = {}


class _SharedClient(django_redis.RedisCacheClient):
    def __init__(self, servers: list[str], **options: Any) -> None:
        super().__init__(servers, **options)
        self._lock = threading.Lock()
        self._redis: dict[int, Any] = {}

    def _get_connection_pool(self, write: bool) -> Any:
        with self._lock:  # Django's check-then-set could make a second pool in a race
            return super()._get_connection_pool(write)

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)
        client = self._redis.get(id(pool))  # pools live as long as this client: their ids are stable
        if client is None:
            client = self._redis.setdefault(id(pool), self._client(connection_pool=pool))
        return client


class RedisCache(django_redis.RedisCache):
    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _SharedClient

    @cached_property
    def _cache(self) -> django_redis.RedisCacheClient:
        key = (tuple(self._servers), repr(sorted(self._options.items())))
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = self._class(self._servers, **self._options)
        return client

    def window_count(self, key: str, previous_key: str, *, timeout: int) -> tuple[int, int]:
        """Count one more in `key` (created with `timeout` seconds to live) and read `previous_key`'s
        count, in one round trip: (this count, the other's, 0 when it has none). The send limit's
        sliding minute (chat/rate_limit.py) took four (add, Django's incr = EXISTS + INCRBY, get)
        on every turn."""
        this, previous = self.make_and_validate_key(key), self.make_and_validate_key(previous_key)
        pipe = self._cache.get_client(this, write=True).pipeline(transaction=False)
        # INCR is atomic, so racing senders in any process never read the same count; SET NX only
        # gives a new key its expiry (a key INCR made alone would never expire).
        pipe.set(this, 0, ex=timeout, nx=True)
        pipe.incr(this)
        pipe.get(previous)
        _, current, before = pipe.execute()
        return int(current), int(before or 0)
