"""Summary jobs requested from the request path without waiting: a small thread pool that runs
after commit, so a turn never waits on the broker (see summary_services for the jobs themselves).
Chat titles are requested on the same thread (title_services)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import Any

from django.db import close_old_connections, connection

from chatapp.chat.gauge import context_ahead_span
from chatapp.chat.models import Conversation
from chatapp.chat.summary_selectors import summary_job_active
from chatapp.chat.summary_services import summary_job_request
from chatapp.providers import llm
from optimizer.types import SummarySpan

logger = logging.getLogger(__name__)


# Summary jobs are requested off the response's critical path, on a thread of their own: creating
# the job and publishing it to the broker can take a broker's whole connect timeout when the broker
# is unreachable without refusing (a black-holed host), and the chat must not wait for that. If the
# process dies before the thread runs, nothing is lost for long: the next turn asks again (the span
# is still uncovered), and a job left pending by a failed publish is published by the sweep. One
# thread: requests are rare, and a dead broker then ties up one thread, not one per chat.
_summary_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="summary-request")


_summary_futures: set[Future] = set()


_summary_futures_lock = threading.Lock()


def summary_request_submit(*, conversation_id: int, span: SummarySpan | None, trigger: str) -> None:
    """Request a summary job of the conversation in the background; returns at once."""
    background_submit(_summary_request_run, conversation_id=conversation_id, span=span, trigger=trigger)


def background_submit(run: Callable[..., None], /, *, conversation_id: int, **kwargs: Any) -> None:
    """Run `run(conversation_id=…, **kwargs)` on the summary requests' thread (work the request path hands
    a worker without waiting for the broker: summaries, titles); returns at once."""
    _track(_summary_executor.submit(_closing, run, conversation_id, kwargs))


def _closing(run: Callable[..., None], conversation_id: int, kwargs: dict[str, Any]) -> None:
    close_old_connections()
    try:
        run(conversation_id=conversation_id, **kwargs)
    except Exception:
        # Asked again by a later turn (a summary's span is still uncovered). Only the id is logged: the
        # arguments may hold a model target, and with it a key.
        logger.exception("%s failed for conversation %s", getattr(run, "__name__", run), conversation_id)
    finally:
        # This thread outlives requests: give its database connection back like a request would.
        connection.close()


def _track(future: Future) -> None:
    with _summary_futures_lock:
        _summary_futures.add(future)
    future.add_done_callback(_summary_future_done)


def _summary_future_done(future: Future) -> None:
    with _summary_futures_lock:
        _summary_futures.discard(future)


def summary_requests_wait(*, timeout: float) -> bool:
    """Wait for the summary requests submitted so far (graceful shutdown, tests); True when all ran."""
    with _summary_futures_lock:
        pending = list(_summary_futures)
    _, not_done = futures_wait(pending, timeout=timeout)
    return not not_done


def _summary_request_run(*, conversation_id: int, span: SummarySpan | None, trigger: str) -> None:
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    # Deleted in the meantime: nothing to summarize. A job in flight: a second would be refused.
    if conversation is not None and not _job_in_flight(conversation=conversation):
        summary_job_request(conversation=conversation, span=span, trigger=trigger)


def _job_in_flight(*, conversation: Conversation) -> bool:
    """A summary job is active in the conversation: one active job per conversation, so a request
    would only find it (summary_job_request) — one read instead of the quota's and settings' reads,
    and for a summary ahead of need, instead of packing the context again to plan it."""
    return summary_job_active(conversation=conversation) is not None


def summary_ahead_submit(*, conversation_id: int, target: llm.LLMTarget, margin_tokens: int) -> None:
    """Plan and request a summary ahead of need, in the background (see context_ahead_span)."""
    background_submit(_summary_ahead_run, conversation_id=conversation_id, target=target, margin_tokens=margin_tokens)


def _summary_ahead_run(*, conversation_id: int, target: llm.LLMTarget, margin_tokens: int) -> None:
    conversation = Conversation.objects.select_related("owner").filter(pk=conversation_id).first()
    if conversation is None or _job_in_flight(conversation=conversation):
        return
    span = context_ahead_span(
        conversation=conversation, user=conversation.owner, target=target, margin_tokens=margin_tokens
    )
    if span is not None:
        summary_job_request(conversation=conversation, span=span, trigger="ahead")
