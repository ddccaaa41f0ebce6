"""The per-user send limit: a sliding minute in the cache (shared through Redis when configured)."""

from __future__ import annotations

import contextlib
import math
import time

from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache

# A minute's counter lives past the next minute, which reads it as the previous one.
_KEY_SECONDS = 130


class RateLimited(Exception):
    def __init__(self, *, limit: int, retry_after: int) -> None:
        self.limit = limit
        self.retry_after = retry_after
        super().__init__(
            f"You are sending messages too quickly (limit: {limit} per minute). "
            f"Try again in {retry_after} second{'s' if retry_after != 1 else ''}."
        )


def send_rate_check(*, user: User) -> None:
    """Allow settings.SEND_RATE_LIMIT_PER_MINUTE model requests per user per sliding minute.

    Sliding-window counter in the cache: the previous minute's count weighted by how much of it still
    overlaps the window, plus this minute's. Raises RateLimited with the seconds to wait.
    """
    limit = settings.SEND_RATE_LIMIT_PER_MINUTE
    now = time.time()
    bucket = int(now // 60)
    key = f"chat:send-rate:{user.pk}:{bucket}"
    previous_key = f"chat:send-rate:{user.pk}:{bucket - 1}"
    # Counted first, checked after, taken back when refused: an increment is atomic in every cache
    # backend (Redis INCR), so sends racing from several processes cannot all read the same count.
    window_count = getattr(cache, "window_count", None)  # Redis (chatapp/redis_cache.py): one round trip
    if window_count is not None:
        current, previous = window_count(key, previous_key, timeout=_KEY_SECONDS)
    else:
        cache.add(key, 0, timeout=_KEY_SECONDS)
        try:
            current = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=_KEY_SECONDS)
            current = 1
        previous = cache.get(previous_key, 0)
    elapsed = now - bucket * 60
    estimate = previous * (60 - elapsed) / 60 + current
    if estimate > limit:
        with contextlib.suppress(ValueError):  # expired meanwhile: nothing to take back
            cache.decr(key)
        raise RateLimited(limit=limit, retry_after=_seconds_to_wait(
            limit=limit, previous=previous, current=current - 1, elapsed=elapsed))


def _seconds_to_wait(*, limit: int, previous: int, current: int, elapsed: float) -> int:
    wait = 60 - elapsed
    if previous and current + 1 <= limit:
        # The old minute's share decays linearly: wait until it has decayed enough.
        wait -= (limit - 1 - current) * 60 / previous
    elif current + 1 > limit:
        # This minute alone is full, and its sends weigh on the next one as it starts: wait into that
        # minute until they have decayed enough (the end of this one was refused again).
        wait += 60 - (limit - 1) * 60 / current
    return max(1, math.ceil(wait))
