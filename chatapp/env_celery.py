"""Celery settings: queue names a worker can read, and values valid one by one that the broker would
turn into a task run twice. Read by settings; each refusal names the variables to change."""

from __future__ import annotations

import re

from django.core.exceptions import ImproperlyConfigured

from chatapp.env import env_str


def env_queue(name: str, default: str) -> str:
    """A queue name. A worker's -Q (and `serve`'s) is a comma-separated list, so a name with a comma is
    never consumed; the filesystem broker names message files after their queue, so a "/" fails every
    enqueue. Both were found only as jobs left queued."""
    value = env_str(name, default)
    if not re.fullmatch(r"[A-Za-z0-9._:-]+", value):
        raise ImproperlyConfigured(
            f"{name} must be one queue name, of letters, digits, '.', '_', '-' and ':', got {value!r}"
        )
    return value


def visibility_timeout_checked(visibility_timeout: int, *, backoff_max_ms: int) -> None:
    """With Redis, a retry's message is taken by a worker at once and held, unacknowledged (acks_late),
    until its countdown ends; Redis hands a message unacknowledged for the visibility timeout to another
    worker. A backoff that can reach the timeout runs its job twice: refused, not shortened, since the
    backoff honours a rate-limited endpoint's Retry-After."""
    if visibility_timeout * 1000 > backoff_max_ms:
        return
    raise ImproperlyConfigured(
        f"CELERY_VISIBILITY_TIMEOUT ({visibility_timeout} s) must exceed SUMMARY_RETRY_BACKOFF_MAX_MS "
        f"({backoff_max_ms} ms = {backoff_max_ms / 1000:g} s): Redis would deliver a retry waiting out its "
        "backoff to a second worker and the job would run twice. Raise the first or lower the second."
    )


def recheck_wait(seconds: float) -> float:
    """How long a job that found its work held elsewhere (a lease, its owner's other summary) waits to
    look again: with Redis at most half the visibility timeout, since the wait is spent holding the
    message unacknowledged (see above). Looking sooner costs one query; a lease can outlast the timeout."""
    from django.conf import settings

    timeout = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout")
    return seconds if timeout is None else min(seconds, timeout / 2)
