"""Running one delivery of a summary job (the Celery task's whole body): the owner's turn (one running
summary per user), the claim (a conditional UPDATE whose `attempts` is the fencing token), the
outcome, and a retry or failure when the model cannot help. See summary_services for the life cycle.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, cast

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

import optimizer
from chatapp.chat.context import context_budget, conversation_config
from chatapp.chat.models import SummaryJob, UserSettings
from chatapp.chat.summary_writing import (
    EmptySummaryError,
    LeaseLostError,
    ModelSummary,
    SpanPlan,
    Status,
    SummaryChangedError,
    SummaryNotShorterError,
    model_summarize,
    span_plan,
    summary_save,
)
from chatapp.env_celery import recheck_wait
from chatapp.providers.llm import LLMError, LLMTarget, llm_target_for
from optimizer.types import Msg, Role

logger = logging.getLogger(__name__)


_CHANGED_WORDS = (
    "The summary it was folding into was edited or discarded meanwhile; nothing was saved, and the job is "
    "planned again from the summary now in use."
)

# Claims beyond the model retries that a job may spend on workers that died mid-run before it gives up.
_LOST_WORKER_ALLOWANCE = 2


@dataclass(frozen=True, slots=True)
class SummaryRunOutcome:
    """What one delivery of a job did; the Celery task only needs `status` and `retry_in`."""

    job_id: int
    status: Literal["done", "failed", "cancelled", "skipped", "retry"]
    detail: str = ""
    summary_id: int | None = None
    retry_in: float = 0.0


def summary_retry_countdown(*, attempt: int) -> float:
    """Exponential backoff with jitter: half of base * 2^(attempt-1) fixed, the other half random."""
    base = settings.SUMMARY_RETRY_BACKOFF_MS / 1000
    cap = settings.SUMMARY_RETRY_BACKOFF_MAX_MS / 1000
    delay = min(cap, base * (2 ** max(0, attempt - 1)))
    return delay / 2 + random.uniform(0, delay / 2)


def _max_attempts() -> int:
    return settings.SUMMARY_MAX_RETRIES + 1 + _LOST_WORKER_ALLOWANCE


def _owner_busy(*, job_id: int, owner_id: int | None) -> str:
    """Why this job should wait ("" if it should not): another summary of the same user is running
    (its lease alive) — one query."""
    now = timezone.now()
    running = SummaryJob.objects.filter(
        conversation__owner_id=owner_id, status=Status.RUNNING, lease_expires_at__gt=now
    ).exclude(pk=job_id)
    return "another summary of this user is running" if running.exists() else ""


def _queued_lease_renew(*, job_id: int) -> None:
    """A queued job that waits its turn is alive (its message comes back every few seconds): its lease is
    renewed as it nears its end, or the sweep took the message for lost and published another, one more
    every SUMMARY_QUEUED_STALE_SECONDS for as long as the other job ran. One write in that many seconds."""
    now = timezone.now()
    SummaryJob.objects.filter(
        pk=job_id, status=Status.QUEUED,
        lease_expires_at__lt=now + timedelta(seconds=2 * settings.SUMMARY_USER_WAIT_SECONDS),
    ).update(lease_expires_at=now + timedelta(seconds=settings.SUMMARY_QUEUED_STALE_SECONDS))


def _job_claim(*, job_id: int) -> SummaryJob | None:
    """Take the job for this delivery, or None if another delivery has it or it is finished."""
    now = timezone.now()
    claimable = Q(status__in=[Status.PENDING, Status.QUEUED]) | (
        Q(status=Status.RUNNING) & (Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True))
    )
    claimed = SummaryJob.objects.filter(claimable, pk=job_id, attempts__lt=_max_attempts()).update(
        status=Status.RUNNING,
        attempts=F("attempts") + 1,
        started_at=Coalesce(F("started_at"), now),
        lease_expires_at=now + timedelta(seconds=settings.SUMMARY_JOB_LEASE_SECONDS),
    )
    if not claimed:
        SummaryJob.objects.filter(claimable, pk=job_id, attempts__gte=_max_attempts()).update(
            status=Status.FAILED,
            error=f"Gave up after {_max_attempts()} attempts (the worker stopped or the model kept failing).",
            finished_at=now,
            lease_expires_at=None,
        )
        return None
    return SummaryJob.objects.select_related("conversation__owner").get(pk=job_id)


def _job_finish(*, job: SummaryJob, status: str, error: str, result: ModelSummary | None = None) -> None:
    """Finish a job that wrote no summary; `result`: the model summary it wrote all the same (its model:
    what its calls spent is on the job already, summary_writing._spent_add)."""
    usage = {"model": result.model} if result is not None else {}
    SummaryJob.objects.filter(pk=job.pk, status=Status.RUNNING, attempts=job.attempts).update(
        status=status, error=error[:2000], finished_at=timezone.now(), lease_expires_at=None, **usage
    )


def _job_claim_for_owner(*, job_id: int) -> tuple[SummaryJob | None, str]:
    """(the claimed job, "") or (None, why the owner's other running summary makes it wait); (None, "")
    when another delivery holds it or it is gone."""
    with transaction.atomic():
        # The owner's row is the lock: two workers cannot both see "none running" and both claim.
        owner_id = SummaryJob.objects.filter(pk=job_id).values_list("conversation__owner_id", flat=True).first()
        if owner_id is not None:  # None: the job is gone, and the claim below finds nothing
            get_user_model().objects.select_for_update().filter(pk=owner_id).values_list("pk", flat=True).first()
        waiting = _owner_busy(job_id=job_id, owner_id=owner_id)
        return (None, waiting) if waiting else (_job_claim(job_id=job_id), "")


def summary_job_run(*, job_id: int, chat_target: LLMTarget | None = None) -> SummaryRunOutcome:
    """Run one delivery of a summary job (the Celery task's whole body).

    `chat_target` stands in for the conversation's own model when the caller packed its turn for
    another one (`manage.py pack` packs for the request's budget): the summary's length is capped by
    the budget of the turns that will send it.
    """
    job, waiting = _job_claim_for_owner(job_id=job_id)
    if waiting:
        # One running summary per user: another user's job gets the worker meanwhile, so a user whose
        # endpoint hangs delays only their own summaries. The job stays queued; no attempt is used.
        _queued_lease_renew(job_id=job_id)
        return SummaryRunOutcome(job_id=job_id, status="retry", detail=waiting,
                                 retry_in=recheck_wait(settings.SUMMARY_USER_WAIT_SECONDS))
    if job is None:
        return _held_elsewhere(job_id=job_id)
    if not job.conversation.owner.is_active:
        # An admin turned the account off after the job was queued: it can do nothing else, so its
        # endpoint is not called for it either. Ended, not left queued, or the sweep would publish it
        # again and again; a summary is asked for again when the chat next needs one.
        _job_finish(job=job, status=Status.CANCELLED, error="Not summarized: the account is turned off.")
        return SummaryRunOutcome(job_id=job_id, status="cancelled", detail="the account is turned off")
    try:
        return _claimed_run(job=job, chat_target=chat_target)
    except Exception as exc:
        # A crash (a bug, a database error) fails the attempt this delivery claimed, not whatever holds
        # the job now: a delivery paused past its lease and then crashing must not fail the one that
        # took over (its summary is saved only while the job runs). The task logs and re-raises.
        _job_finish(job=job, status=Status.FAILED, error=f"Internal error while summarizing ({type(exc).__name__}).")
        raise


def _claimed_run(*, job: SummaryJob, chat_target: LLMTarget | None) -> SummaryRunOutcome:
    """The delivery's work once it holds the job: plan the span, write the summary, save it."""
    job_id = job.pk
    conversation = job.conversation
    plan = span_plan(job=job, conversation=conversation)
    if plan is None or not plan.rows:
        _job_finish(job=job, status=Status.CANCELLED, error="Nothing new to summarize.")
        return SummaryRunOutcome(job_id=job_id, status="cancelled", detail="nothing to summarize")

    chat_config = conversation_config(conversation=conversation)
    if chat_target is None:
        chat_target = llm_target_for(config=chat_config)
    # the summary is sent inside the chat's budget: its length is capped by that budget's share
    chat_budget = context_budget(target=chat_target)
    prefs = UserSettings.objects.filter(user_id=conversation.owner_id).select_related("summary_config").first()
    summary_config = prefs.summary_config if prefs is not None and prefs.summary_config_id else chat_config
    target = llm_target_for(config=summary_config)

    msgs = [
        Msg(id=str(r.pk), role=cast(Role, r.role), content=r.content, tokens=r.token_count or None,
            created_at=r.created_at)  # the model dates what it keeps by them
        for r in plan.rows
    ]
    previous_text = optimizer.summary_body(plan.previous.content) if plan.previous is not None else None
    final_status = Status.DONE
    note = ""
    model_result: ModelSummary | None = None
    if not target.offline:
        try:
            model_result = model_summarize(
                job=job,
                target=target,
                msgs=msgs,
                previous=previous_text,
                instructions=job.instructions,
                chat_budget=chat_budget,
            )
        except LeaseLostError:
            return SummaryRunOutcome(job_id=job_id, status="skipped", detail="another attempt took over")
        except (LLMError, EmptySummaryError) as exc:
            reason = getattr(exc, "user_message", "") or str(exc)
            retryable = isinstance(exc, EmptySummaryError) or bool(getattr(exc, "retryable", False))
            if retryable and job.attempts <= settings.SUMMARY_MAX_RETRIES:
                return _job_release_for_retry(job=job, reason=reason, at_least=getattr(exc, "retry_after", None))
            if retryable:
                note = f"The model failed {job.attempts} times ({reason}); an extractive summary was written instead."
            else:
                final_status = Status.FAILED
                note = f"{reason} An extractive summary was written instead."
            logger.warning("summary job %s: model failed (%s); extractive fallback", job_id, reason)

    if model_result is None:
        target_tokens = optimizer.build_summary_prompt(
            msgs,
            previous_summary=previous_text,
            instructions=job.instructions,
            model=chat_target.model,
            budget=chat_budget,
        ).target_tokens
        text = optimizer.extractive_summary(
            msgs, previous_summary=previous_text, target_tokens=target_tokens, model=chat_target.model
        )
        model_result = ModelSummary(text=text.strip(), model="extractive")
        extractive = True
    else:
        extractive = False

    return _saved(job=job, plan=plan, result=model_result, extractive=extractive, chat_model=chat_target.model,
                  status=final_status, note=note)


def _saved(
    *, job: SummaryJob, plan: SpanPlan, result: ModelSummary, extractive: bool, chat_model: str, status: str, note: str
) -> SummaryRunOutcome:
    """Save the written summary and say how the delivery ended."""
    try:
        summary = summary_save(job=job, plan=plan, result=result, extractive=extractive, chat_model=chat_model,
                               status=status, note=note)
    except SummaryChangedError:
        return _job_release_for_retry(job=job, reason=_CHANGED_WORDS)
    except SummaryNotShorterError as exc:
        _job_finish(job=job, status=Status.CANCELLED, error=str(exc), result=None if extractive else result)
        return SummaryRunOutcome(job_id=job.pk, status="cancelled", detail="the summary was not shorter")
    if summary is None:
        return SummaryRunOutcome(job_id=job.pk, status="skipped", detail="another attempt took over")
    return SummaryRunOutcome(job_id=job.pk, status="done" if status == Status.DONE else "failed", detail=note,
                             summary_id=summary.pk)


def _held_elsewhere(*, job_id: int) -> SummaryRunOutcome:
    """Not claimed. If another delivery holds the job, come back when its lease ends: a message
    redelivered because its worker process died (reject_on_worker_lost) then takes the job over
    without waiting for a sweep; if the holder finishes first, the check finds the job done."""
    held = (
        SummaryJob.objects.filter(pk=job_id, status=Status.RUNNING).values_list("lease_expires_at", flat=True).first()
    )
    if held is None:
        return SummaryRunOutcome(job_id=job_id, status="skipped", detail="finished or unknown")
    wait = recheck_wait(max(0.0, (held - timezone.now()).total_seconds()) + 1.0)
    return SummaryRunOutcome(job_id=job_id, status="retry", detail="held by another delivery", retry_in=wait)


def _job_release_for_retry(*, job: SummaryJob, reason: str, at_least: float | None = None) -> SummaryRunOutcome:
    """`at_least`: the seconds a rate-limited endpoint asked for (Retry-After). A retry sooner is refused
    again, and the retries would run out against the limit; up to the backoff's cap, which the broker's
    visibility timeout is set above."""
    countdown = summary_retry_countdown(attempt=job.attempts)
    if at_least:
        countdown = max(countdown, min(at_least, settings.SUMMARY_RETRY_BACKOFF_MAX_MS / 1000))
    # The lease covers the backoff plus a margin: if the retry message is lost, the sweep republishes.
    lease = timezone.now() + timedelta(seconds=countdown + settings.SUMMARY_QUEUED_STALE_SECONDS)
    SummaryJob.objects.filter(pk=job.pk, status=Status.RUNNING, attempts=job.attempts).update(
        status=Status.QUEUED,
        error=f"Attempt {job.attempts} failed: {reason} Retrying in {countdown:.1f} s."[:2000],
        lease_expires_at=lease,
    )
    return SummaryRunOutcome(job_id=job.pk, status="retry", detail=reason, retry_in=countdown)
