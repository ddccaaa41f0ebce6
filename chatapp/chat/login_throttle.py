"""Failed sign-ins on the login page, counted per client address and per username in the cache
(shared through Redis when configured): past either limit the page refuses (429) until its window
ends, whatever the password, so passwords cannot be guessed there faster than the API's token
endpoint allows. A success clears the username's count. The address is the one the API's throttles
use (`NUM_PROXIES`: only a trusted proxy's X-Forwarded-For entry counts)."""

from __future__ import annotations

import contextlib
import time

from django.core.cache import cache
from django.http import HttpRequest
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _rate(scope: str) -> tuple[int, int]:
    """(failures allowed, window seconds) of settings' rate `scope`, such as "20/hour"."""
    count, period = api_settings.DEFAULT_THROTTLE_RATES[scope].split("/")
    return int(count), _SECONDS[period[0]]


def _keys(*, request: HttpRequest, username: str) -> list[tuple[str, int, int]]:
    """(cache key, limit, window end) of each count this attempt falls under."""
    now = time.time()
    keys = []
    for scope, who in (("login_address", BaseThrottle().get_ident(request)),
                       ("login_username", username.strip().lower())):
        limit, window = _rate(scope)
        bucket = int(now // window)
        keys.append((f"login-fail:{scope}:{who}:{bucket}", limit, (bucket + 1) * window))
    return keys


def login_wait(*, request: HttpRequest, username: str) -> int:
    """Seconds until a sign-in may be tried again (0: now)."""
    keys = _keys(request=request, username=username)
    counts = cache.get_many([key for key, _, _ in keys])
    waits = [end - time.time() for key, limit, end in keys if counts.get(key, 0) >= limit]
    return max(1, int(max(waits)) + 1) if waits else 0


def login_failure_count(*, request: HttpRequest, username: str) -> None:
    for key, _, end in _keys(request=request, username=username):
        # add then incr: atomic in every cache backend (Redis INCR), so parallel guesses all count.
        cache.add(key, 0, timeout=int(end - time.time()) + 1)
        with contextlib.suppress(ValueError):  # expired between the two: the window is over anyway
            cache.incr(key)


def login_failures_clear(*, request: HttpRequest, username: str) -> None:
    """A success clears the username's count (the address's stays: it may be guessing at others)."""
    _, (username_key, _, _) = _keys(request=request, username=username)
    cache.delete(username_key)
