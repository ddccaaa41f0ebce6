"""Background conversation summaries (issue 4): request, run, edit, discard, sweep.

Job life cycle (SummaryJob.status):

    pending ──publish──▶ queued ──claim──▶ running ──▶ done | failed
    awaiting ──"compact now"──▶ pending          running ──retryable model error──▶ queued (later)
    (any active) ──▶ cancelled (nothing to summarize, or "compact now?" left unanswered)

- At most one active job per conversation: the database's partial unique constraint decides, so a
  double click or two requests at once produce one job (the loser gets the existing one back).
- A job is published with its id only, after the transaction that created it commits. When the
  broker is unreachable the job stays `pending` and the chat carries on; the sweep (worker start-up,
  celery beat, `manage.py summary_sweep`) publishes it later.
- A delivery runs only if it wins the claim, a conditional UPDATE (queued → running) that also bumps
  `attempts`. `attempts` is the fencing token: the summary is saved only if the job is still running
  under the same attempt, so a duplicate delivery, a redelivery after a worker was killed, or a slow
  worker whose lease ran out can never write a second summary.
- Model errors: 429 / 5xx / timeouts / connection errors are retried with exponential backoff and
  jitter up to settings.SUMMARY_MAX_RETRIES; after that the extractive summarizer writes the summary
  (job `done`, marked extractive, the model error kept in `error`). An error that cannot succeed on
  retry (bad key, unknown model, bad request) is not retried: the job is `failed` with the reason so
  the user sees that the model config needs fixing — and the extractive summarizer still writes a
  summary (attached to the failed job), because the conversation needs one either way and waiting
  for the user to fix a key must not leave the context to plain truncation.
"""

from __future__ import annotations

import logging
import random
import re
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Literal, cast

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

import optimizer
from chatapp.chat.context import context_budget, conversation_config, first_user_message_id, live_chat_q
from chatapp.chat.layout import static_layer_q
from chatapp.chat.llm import LLMError, LLMTarget, llm_complete, llm_target_for
from chatapp.chat.models import Conversation, Message, SummaryJob, UserSettings
from chatapp.chat.selectors import message_numbers
from chatapp.chat.summary_selectors import (
    summary_current,
    summary_job_active,
    summary_jobs_to_sweep,
    summary_quota_reason,
    summary_quota_remaining,
)
from chatapp.chat.textsafe import text_storable
from optimizer.types import Msg, Role, SummarySpan

logger = logging.getLogger(__name__)

Status = SummaryJob.Status
Trigger = SummaryJob.Trigger

_COMPACT_COMMAND = re.compile(r"^\s*/compact(?:\s+(?P<instructions>.*))?\s*$", re.DOTALL | re.IGNORECASE)
# Claims beyond the model retries that a job may spend on workers that died mid-run before it gives up.
_LOST_WORKER_ALLOWANCE = 2
# Share of the summary model's window one summarizing call may fill with span messages; the rest is
# instructions, the previous summary and the reply.
_CHUNK_SHARE = 0.6
MAX_INSTRUCTIONS_CHARS = 2000


@dataclass(frozen=True, slots=True)
class SummaryRunOutcome:
    """What one delivery of a job did; the Celery task only needs `status` and `retry_in`."""

    job_id: int
    status: Literal["done", "failed", "cancelled", "skipped", "retry"]
    detail: str = ""
    summary_id: int | None = None
    retry_in: float = 0.0


# --- Requesting ---------------------------------------------------------------------------------


def compact_command_parse(*, text: str) -> str | None:
    """`/compact keep all the SQL` typed in the composer → "keep all the SQL"; not a command → None."""
    match = _COMPACT_COMMAND.match(text or "")
    if match is None:
        return None
    return (match.group("instructions") or "").strip()


def _span_bounds(*, conversation: Conversation, span: SummarySpan | None) -> tuple[int | None, int | None]:
    """Inclusive ids of the first and last message of the span the optimizer planned.

    A span is every non-static message after `after_id` (exclusive; None: from the start) through
    `through_id`. `span.ids` lists only the messages the request had in view (the web app passes a
    partial view), and ids are global across conversations, so the first one is looked up: the first
    live message of this conversation after `after_id` that is not in the static layer.
    """
    if span is None:
        return None, None
    through = int(span.through_id)
    live = Message.objects.filter(live_chat_q(), conversation=conversation)
    first_user_id = first_user_message_id(conversation=conversation)
    first = (
        live.filter(id__gt=int(span.after_id) if span.after_id is not None else 0, id__lte=through)
        .exclude(static_layer_q(first_user_id=first_user_id))
        .order_by("id")
        .values_list("id", flat=True)
        .first()
    )
    return first, through


def _clean_instructions(instructions: str) -> str:
    instructions = (instructions or "").strip()
    if len(instructions) > MAX_INSTRUCTIONS_CHARS:
        raise ValidationError({"instructions": [f"At most {MAX_INSTRUCTIONS_CHARS:,} characters."]})
    return instructions


def summary_job_request(
    *,
    conversation: Conversation,
    span: SummarySpan | None = None,
    trigger: str = Trigger.AUTO,
    instructions: str = "",
    publish: bool = True,
) -> SummaryJob | None:
    """Start a summary of `conversation` in the background; returns the job, or None when not allowed.

    Called by the request path (after its transaction commits) when the optimizer chose summarize or
    usage crossed the trigger (`trigger="ahead"`), and by `conversation_compact` for manual ones.
    Automatic jobs respect the daily quota (None beyond it) and the user's "confirm before automatic
    compaction" setting (the job then waits as `awaiting`). If a job is already active, that job is
    returned and no second one is created. `publish=False` leaves a new job `pending` without sending
    it to the broker, for a caller that runs it itself with `summary_job_run` (`manage.py pack`).
    """
    instructions = _clean_instructions(instructions)
    status = Status.PENDING
    if trigger != Trigger.MANUAL:
        if summary_quota_remaining(conversation=conversation) <= 0:
            logger.info("summary not started for conversation %s: %s", conversation.pk, summary_quota_reason())
            return None
        confirm = UserSettings.objects.filter(user_id=conversation.owner_id, confirm_compaction=True).exists()
        if confirm:
            status = Status.AWAITING_CONFIRMATION
    span_from_id, span_through_id = _span_bounds(conversation=conversation, span=span)
    try:
        with transaction.atomic():
            job = SummaryJob.objects.create(
                conversation=conversation,
                status=status,
                trigger=trigger,
                instructions=instructions,
                span_from_id=span_from_id,
                span_through_id=span_through_id,
            )
    except IntegrityError:
        # The constraint "one active job per conversation" refused a second one.
        existing = summary_job_active(conversation=conversation)
        if existing is None:  # it finished between the insert and this read: the caller may ask again
            return None
        if trigger == Trigger.MANUAL and instructions:
            _instructions_merge(job=existing, instructions=instructions)
        return existing
    if status == Status.PENDING and publish:
        job_id = job.pk
        transaction.on_commit(lambda: summary_job_enqueue(job_id=job_id))
    return job


def _instructions_merge(*, job: SummaryJob, instructions: str) -> None:
    """Hand /compact instructions to a job that has not started yet (a started one keeps its own)."""
    updated = SummaryJob.objects.filter(
        pk=job.pk, status__in=[Status.PENDING, Status.QUEUED, Status.AWAITING_CONFIRMATION]
    ).update(instructions=instructions)
    if updated:
        job.instructions = instructions


def conversation_compact(*, conversation: Conversation, instructions: str = "") -> SummaryJob:
    """"Compact now" / `/compact [instructions]`: summarize at once, whatever the quota.

    A job waiting for confirmation is confirmed (with the instructions); a job that is queued gets
    the instructions; a running job is returned as is; otherwise a manual job is created.
    """
    instructions = _clean_instructions(instructions)
    confirmed = SummaryJob.objects.filter(
        conversation=conversation, status=Status.AWAITING_CONFIRMATION
    ).update(status=Status.PENDING, trigger=Trigger.MANUAL, instructions=instructions)
    job = summary_job_active(conversation=conversation) if confirmed else None
    if job is not None:
        job_id = job.pk
        transaction.on_commit(lambda: summary_job_enqueue(job_id=job_id))
        return job
    for _ in range(3):
        job = summary_job_request(conversation=conversation, trigger=Trigger.MANUAL, instructions=instructions)
        if job is not None:
            return job
    raise ValidationError("A summary is finishing right now; try again in a moment.")


# A shorter name for the composer's /compact and the "Compact now" button.
compact_now = conversation_compact


def _publish(*, job_ids: list[int]) -> list[int]:
    """Publish job ids to the summary queue; returns the ids that reached the broker."""
    from chatapp.chat.tasks import summarize_conversation  # the task module imports this one

    published: list[int] = []
    try:
        # A request must not hang on a dead broker: one connection attempt (max_retries 0, the
        # transport's connect timeout), no publish retries. The sweep publishes what did not get through.
        with summarize_conversation.app.connection_for_write(transport_options={"max_retries": 0}) as conn:
            for job_id in job_ids:
                summarize_conversation.apply_async(
                    args=[job_id], queue=settings.CELERY_SUMMARY_QUEUE, retry=False, connection=conn
                )
                published.append(job_id)
    except Exception as exc:  # kombu and redis raise several connection error types; all mean "later"
        logger.warning("summary jobs %s not published (broker unreachable: %s); the sweep will retry",
                       [j for j in job_ids if j not in published], exc)
    return published


def _mark_published(*, job_id: int) -> None:
    now = timezone.now()
    stale_at = now + timedelta(seconds=settings.SUMMARY_QUEUED_STALE_SECONDS)
    # A worker may already have claimed it (running): then these conditional updates do nothing.
    SummaryJob.objects.filter(pk=job_id, status=Status.PENDING).update(status=Status.QUEUED, lease_expires_at=stale_at)
    SummaryJob.objects.filter(
        Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True),
        pk=job_id,
        status__in=[Status.QUEUED, Status.RUNNING],
    ).update(status=Status.QUEUED, lease_expires_at=stale_at)


def summary_job_enqueue(*, job_id: int) -> bool:
    """Publish the job's id to the summary queue. False (job left as it was) if the broker is unreachable."""
    if not _publish(job_ids=[job_id]):
        return False
    _mark_published(job_id=job_id)
    return True


def summary_jobs_sweep() -> dict[str, int]:
    """Publish jobs whose message is missing (broker was down) or presumed lost; expire old questions.

    Idempotent and safe to run from several workers at once: a job published twice is run once.
    """
    now = timezone.now()
    expired = SummaryJob.objects.filter(
        status=Status.AWAITING_CONFIRMATION,
        created_at__lt=now - timedelta(seconds=settings.SUMMARY_AWAITING_EXPIRY_SECONDS),
    ).update(status=Status.CANCELLED, error="Nobody confirmed the compaction.", finished_at=now)
    candidates = summary_jobs_to_sweep()
    published = _publish(job_ids=candidates) if candidates else []
    for job_id in published:
        _mark_published(job_id=job_id)
    if candidates:
        logger.info("summary sweep: %s of %s jobs published", len(published), len(candidates))
    return {"candidates": len(candidates), "published": len(published), "expired": expired}


# --- Running (called by the Celery task) ---------------------------------------------------------


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
    return SummaryJob.objects.select_related("conversation").get(pk=job_id)


def _job_finish(*, job: SummaryJob, status: str, error: str) -> None:
    SummaryJob.objects.filter(pk=job.pk, status=Status.RUNNING, attempts=job.attempts).update(
        status=status, error=error[:2000], finished_at=timezone.now(), lease_expires_at=None
    )


@dataclass(slots=True)
class _Plan:
    rows: list[Message]
    previous: Message | None
    upper_exclusive: int


def _span_plan(*, job: SummaryJob, conversation: Conversation) -> _Plan | None:
    """Re-plan the span from the database as it is now (the conversation may have moved since).

    Span = live chat messages after the newest summary's covered range and before the verbatim
    window, minus the static layer (system messages, pins, the first user message), which is always
    sent anyway. A manual compaction ends the span before the newest SUMMARY_MANUAL_KEEP_ROUNDS rounds
    (or the window start, whichever is later).
    """
    live = Message.objects.filter(live_chat_q(), conversation=conversation)
    upper = conversation.window_start_id
    if upper is None and job.span_through_id is not None:
        upper = job.span_through_id + 1
    if job.trigger == Trigger.AHEAD and job.span_through_id is not None:
        # Ahead of need: the span the next request will evict is still inside today's window.
        upper = max(upper or 0, job.span_through_id + 1)
    if job.trigger == Trigger.MANUAL:
        recent_users = list(
            live.filter(role=Message.Role.USER)
            .order_by("-id")
            .values_list("id", flat=True)[: settings.SUMMARY_MANUAL_KEEP_ROUNDS]
        )
        if len(recent_users) == settings.SUMMARY_MANUAL_KEEP_ROUNDS:
            upper = max(upper or 0, recent_users[-1])
    if upper is None:
        return None
    previous = summary_current(conversation=conversation)
    lower = previous.covers_through_id if previous is not None and previous.covers_through_id else 0
    first_user_id = first_user_message_id(conversation=conversation)
    rows = list(
        live.filter(id__gt=lower, id__lt=upper)
        .exclude(static_layer_q(first_user_id=first_user_id))
        .order_by("id")
        .only("id", "role", "content", "token_count", "char_count")
    )
    return _Plan(rows=rows, previous=previous, upper_exclusive=upper)


def _chunks(msgs: list[Msg], *, limit: int) -> list[list[Msg]]:
    chunks: list[list[Msg]] = [[]]
    used = 0
    for msg in msgs:
        tokens = msg.tokens or 0
        if chunks[-1] and used + tokens > limit:
            chunks.append([])
            used = 0
        chunks[-1].append(msg)
        used += tokens
    return chunks


@dataclass(slots=True)
class _ModelSummary:
    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


def _lease_renew(*, job: SummaryJob) -> bool:
    """Extend this delivery's lease before a long step (a model call may take LLM_TIMEOUT_SECONDS).

    Conditional on the fencing token: False when another delivery has taken the job over (or it was
    finished elsewhere), and then this one must stop instead of spending model calls for nothing.
    """
    lease = timezone.now() + timedelta(seconds=settings.SUMMARY_JOB_LEASE_SECONDS)
    return bool(
        SummaryJob.objects.filter(pk=job.pk, status=Status.RUNNING, attempts=job.attempts).update(
            lease_expires_at=lease
        )
    )


class _LeaseLostError(Exception):
    """Another delivery owns the job now; this one stops without writing anything."""


def _model_summarize(
    *, job: SummaryJob, target, msgs: list[Msg], previous: str | None, instructions: str, chat_budget: int
) -> _ModelSummary:
    """Fold the span into the previous summary with the model, one call per window-sized chunk.

    The job's lease is renewed before every call, so a long span on a slow model is not taken for a
    dead worker by the sweep; raises _LeaseLostError if the job was taken over meanwhile.
    """
    prev_tokens = optimizer.count_text(previous, model=target.model) if previous else 0
    limit = max(1024, int(target.context_window * _CHUNK_SHARE) - prev_tokens)
    result = _ModelSummary(text=previous or "", model=target.model)
    cost = 0.0
    priced = True
    for chunk in _chunks(msgs, limit=limit):
        if not _lease_renew(job=job):
            raise _LeaseLostError
        prompt = optimizer.build_summary_prompt(
            chunk,
            previous_summary=result.text or None,
            instructions=instructions,
            model=target.model,
            budget=chat_budget,
        )
        # Shorter than a chat reply's timeout: a dead endpoint holds a shared worker for less.
        completion = llm_complete(target=target, messages=prompt.messages, max_tokens=prompt.max_tokens,
                                  timeout=settings.SUMMARY_TIMEOUT_SECONDS)
        text = text_storable((completion.text or "").strip())
        if not text:
            raise _EmptySummaryError("The model returned an empty summary.")
        result.text = text
        result.model = completion.model or target.model
        result.prompt_tokens += completion.prompt_tokens or 0
        result.completion_tokens += completion.completion_tokens or 0
        call_cost = optimizer.cost_usd(
            target.model,
            prompt_tokens=completion.prompt_tokens or 0,
            completion_tokens=completion.completion_tokens or 0,
            cached_tokens=completion.cached_tokens or 0,
        )
        if call_cost is None:
            priced = False
        else:
            cost += call_cost
    result.cost_usd = cost if priced else None
    return result


class _EmptySummaryError(Exception):
    """An empty reply: treated like a transient model failure (retried, then extractive)."""


def _header(*, conversation_id: int, covers_from: int, covers_through: int, covered: int, source_chars: int,
            body: str) -> str:
    """A summary's header line: the messages it covers by the users' numbering, and its characters
    (the body's, the one count every view shows)."""
    numbers = message_numbers(conversation_id=conversation_id, ids=[covers_from, covers_through])
    return optimizer.summary_header(
        covered_messages=covered,
        source_chars=source_chars,
        summary_chars=len(body),
        first_label=str(numbers[covers_from]),
        last_label=str(numbers[covers_through]),
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
        return SummaryRunOutcome(job_id=job_id, status="retry", detail=waiting,
                                 retry_in=float(settings.SUMMARY_USER_WAIT_SECONDS))
    if job is None:
        return _held_elsewhere(job_id=job_id)
    conversation = job.conversation
    plan = _span_plan(job=job, conversation=conversation)
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
        Msg(id=str(r.pk), role=cast(Role, r.role), content=r.content, tokens=r.token_count or None) for r in plan.rows
    ]
    previous_text = optimizer.summary_body(plan.previous.content) if plan.previous is not None else None
    final_status = Status.DONE
    note = ""
    model_result: _ModelSummary | None = None
    if not target.offline:
        try:
            model_result = _model_summarize(
                job=job,
                target=target,
                msgs=msgs,
                previous=previous_text,
                instructions=job.instructions,
                chat_budget=chat_budget,
            )
        except _LeaseLostError:
            return SummaryRunOutcome(job_id=job_id, status="skipped", detail="another attempt took over")
        except (LLMError, _EmptySummaryError) as exc:
            reason = getattr(exc, "user_message", "") or str(exc)
            retryable = isinstance(exc, _EmptySummaryError) or bool(getattr(exc, "retryable", False))
            if retryable and job.attempts <= settings.SUMMARY_MAX_RETRIES:
                return _job_release_for_retry(job=job, reason=reason)
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
        model_result = _ModelSummary(text=text.strip(), model="extractive")
        extractive = True
    else:
        extractive = False

    summary = _summary_save(
        job=job,
        plan=plan,
        result=model_result,
        extractive=extractive,
        chat_model=chat_target.model,
        status=final_status,
        note=note,
    )
    if summary is None:
        return SummaryRunOutcome(job_id=job_id, status="skipped", detail="another attempt took over")
    return SummaryRunOutcome(job_id=job_id, status="done" if final_status == Status.DONE else "failed", detail=note,
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
    wait = max(0.0, (held - timezone.now()).total_seconds()) + 1.0
    return SummaryRunOutcome(job_id=job_id, status="retry", detail="held by another delivery", retry_in=wait)


def _job_release_for_retry(*, job: SummaryJob, reason: str) -> SummaryRunOutcome:
    countdown = summary_retry_countdown(attempt=job.attempts)
    # The lease covers the backoff plus a margin: if the retry message is lost, the sweep republishes.
    lease = timezone.now() + timedelta(seconds=countdown + settings.SUMMARY_QUEUED_STALE_SECONDS)
    SummaryJob.objects.filter(pk=job.pk, status=Status.RUNNING, attempts=job.attempts).update(
        status=Status.QUEUED,
        error=f"Attempt {job.attempts} failed: {reason} Retrying in {countdown:.1f} s."[:2000],
        lease_expires_at=lease,
    )
    return SummaryRunOutcome(job_id=job.pk, status="retry", detail=reason, retry_in=countdown)


def _summary_save(
    *,
    job: SummaryJob,
    plan: _Plan,
    result: _ModelSummary,
    extractive: bool,
    chat_model: str,
    status: str,
    note: str,
) -> Message | None:
    """Write the summary and finish the job in one transaction, only if this attempt still owns the
    job (the fencing check), so no interleaving of deliveries can write two summaries."""
    conversation = job.conversation
    previous = plan.previous
    covers_from = previous.covers_from_id if previous is not None and previous.covers_from_id else plan.rows[0].pk
    covers_through = plan.rows[-1].pk
    covered = (previous.covered_message_count or 0 if previous is not None else 0) + len(plan.rows)
    source_chars = (previous.source_chars or 0 if previous is not None else 0) + sum(
        r.char_count or len(r.content) for r in plan.rows
    )
    header = _header(conversation_id=conversation.pk, covers_from=covers_from, covers_through=covers_through,
                     covered=covered, source_chars=source_chars, body=result.text)
    content = f"{header}\n\n{result.text}"
    token_count = optimizer.count_message({"role": "system", "content": content}, model=chat_model)
    with transaction.atomic():
        owner = (
            SummaryJob.objects.select_for_update()
            .filter(pk=job.pk, status=Status.RUNNING, attempts=job.attempts)
            .first()
        )
        if owner is None:
            return None
        # Not indexed (search_services): a summary is neither a recall candidate nor a search hit.
        summary = Message.objects.create(
            conversation=conversation,
            role=Message.Role.SYSTEM,
            kind=Message.Kind.SUMMARY,
            content=content,
            token_count=token_count,
            char_count=len(content),
            model=result.model,
            prompt_tokens=result.prompt_tokens if not extractive else None,
            completion_tokens=result.completion_tokens if not extractive else None,
            covers_from_id=covers_from,
            covers_through_id=covers_through,
            covered_message_count=covered,
            source_chars=source_chars,
            extractive=extractive,
            cost_usd=Decimal(str(round(result.cost_usd, 6))) if result.cost_usd is not None else None,
        )
        if job.trigger == Trigger.MANUAL:
            # A manual compaction moves the verbatim window past what it summarized, so the next
            # request sends the summary instead of those messages (an automatic one follows the window).
            Conversation.objects.filter(
                Q(window_start_id__isnull=True) | Q(window_start_id__lt=plan.upper_exclusive), pk=conversation.pk
            ).update(window_start_id=plan.upper_exclusive)
        # Summaries actually written (model or extractive): what the selector's "N summaries so far" means.
        Conversation.objects.filter(pk=conversation.pk).update(summary_count=F("summary_count") + 1)
        SummaryJob.objects.filter(pk=job.pk).update(
            summary=summary,
            status=status,
            error=note[:2000],
            model=result.model,
            prompt_tokens=summary.prompt_tokens,
            completion_tokens=summary.completion_tokens,
            cost_usd=summary.cost_usd,
            finished_at=timezone.now(),
            lease_expires_at=None,
        )
    return summary


def summary_job_fail(*, job_id: int, reason: str) -> None:
    """Mark a running job failed after an unexpected error (so it is not redelivered forever)."""
    SummaryJob.objects.filter(pk=job_id, status=Status.RUNNING).update(
        status=Status.FAILED, error=reason[:2000], finished_at=timezone.now(), lease_expires_at=None
    )


# --- User controls --------------------------------------------------------------------------------


def summary_edit(*, summary: Message, content: str) -> Message:
    """Replace the summary in use with an edited text; the edited text is what the model sees next.

    The edit is a new summary message (same coverage, `edited`, `edited_from` the old one) and the
    old one is discarded, never changed: optimization records point at the summary they sent, so
    each record keeps rebuilding exactly what the model saw. Only the summary in use (the newest
    one not discarded) can be edited — an older one no longer reaches the model.
    """
    body = optimizer.summary_body(content or "")
    if not body:
        raise ValidationError({"content": ["A summary cannot be empty; discard it instead."]})
    if len(body) > settings.MAX_MESSAGE_CHARS:
        raise ValidationError({"content": [f"At most {settings.MAX_MESSAGE_CHARS:,} characters."]})
    conversation = summary.conversation
    # The header line is the app's, rebuilt for the new text: what it covers and its characters stay true.
    if summary.covers_from_id is not None and summary.covers_through_id is not None:
        header = _header(conversation_id=conversation.pk, covers_from=summary.covers_from_id,
                         covers_through=summary.covers_through_id, covered=summary.covered_message_count or 0,
                         source_chars=summary.source_chars or 0, body=body)
    else:
        header = optimizer.summary_header(covered_messages=summary.covered_message_count or 0,
                                          source_chars=summary.source_chars or 0, summary_chars=len(body))
    content = f"{header}\n\n{body}"
    chat_target = llm_target_for(config=conversation_config(conversation=conversation))
    token_count = optimizer.count_message({"role": "system", "content": content}, model=chat_target.model)
    with transaction.atomic():
        # Locks the old summary so two edits at once cannot both replace it (the loser gets the error).
        current = (
            Message.objects.select_for_update()
            .filter(pk=summary.pk, kind=Message.Kind.SUMMARY, discarded=False)
            .first()
        )
        newer = Message.objects.filter(
            conversation_id=summary.conversation_id, kind=Message.Kind.SUMMARY, discarded=False, id__gt=summary.pk
        ).exists()
        if current is None or newer:
            raise ValidationError(
                "Only the summary in use can be edited; this one was discarded or replaced by a newer one.",
                code="not_current",
            )
        if current.content == content:
            return current
        # Not indexed, like every summary (search_services).
        edited = Message.objects.create(
            conversation_id=current.conversation_id,
            role=Message.Role.SYSTEM,
            kind=Message.Kind.SUMMARY,
            content=content,
            token_count=token_count,
            char_count=len(content),
            model=current.model,
            covers_from_id=current.covers_from_id,
            covers_through_id=current.covers_through_id,
            covered_message_count=current.covered_message_count,
            source_chars=current.source_chars,
            extractive=current.extractive,
            edited=True,
            edited_from=current,
        )
        Message.objects.filter(pk=current.pk).update(discarded=True, updated_at=timezone.now())
    return edited


def summary_discard(*, summary: Message) -> Message:
    """Stop using a summary: this one and its edit chain (the versions it was edited from and into).
    Every message stays stored, and other summaries are untouched.

    When it was the summary in use, the window had been placed after what it covered, so those
    messages would be neither sent nor summarized: the stored window is cleared and the next request
    refits the history to the budget (window recomputed, the previous summary where it fits, recall
    over the rest), sending at least what truncation would.
    """
    chain = {summary.pk}
    frontier = [summary.pk]
    while frontier:  # the edits of it, and theirs
        frontier = list(Message.objects.filter(edited_from_id__in=frontier).values_list("id", flat=True))
        chain.update(frontier)
    older = summary.edited_from_id
    while older is not None and older not in chain:  # what it was edited from
        chain.add(older)
        older = Message.objects.filter(pk=older).values_list("edited_from_id", flat=True).first()
    live = Message.objects.filter(conversation_id=summary.conversation_id, kind=Message.Kind.SUMMARY, discarded=False)
    with transaction.atomic():
        in_use = live.select_for_update().order_by("-id").values_list("id", flat=True).first()
        live.filter(id__in=chain).update(discarded=True, updated_at=timezone.now())
        if in_use in chain:
            Conversation.objects.filter(pk=summary.conversation_id).update(window_start_id=None)
    summary.refresh_from_db()
    return summary
