"""Background conversation summaries (issue 4): request, publish, sweep, edit, discard. The worker side
(claim and run a job) is `summary_runner`; writing a summary from a span is `summary_writing`.

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
import re
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.http import Http404
from django.utils import timezone

import optimizer
from chatapp.chat.context import conversation_config, first_user_message_id, live_chat_q
from chatapp.chat.layout import static_layer_q
from chatapp.chat.models import Conversation, Message, SummaryJob, UserSettings
from chatapp.chat.summary_cooldown import summary_ask_silenced
from chatapp.chat.summary_selectors import (
    summary_edit_chain,
    summary_job_active,
    summary_jobs_to_sweep,
    summary_quota_reason,
    summary_quota_remaining,
)
from chatapp.chat.summary_writing import Status, Trigger, manual_span_exists, summary_header_for, summary_row_create
from chatapp.providers.llm import llm_target_for
from optimizer.types import SummarySpan

logger = logging.getLogger(__name__)


_COMPACT_COMMAND = re.compile(r"^\s*/compact(?:\s+(?P<instructions>.*))?\s*$", re.DOTALL | re.IGNORECASE)


MAX_INSTRUCTIONS_CHARS = 2000


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
    compaction" setting (the job then waits as `awaiting`; after a "Not now" it is not asked again
    until the history grows by another tenth of the budget: None, see summary_cooldown). If a job
    is already active, that job is returned and no second one is created. `publish=False` leaves a
    new job `pending` without sending it to the broker, for a caller that runs it itself with
    `summary_job_run` (`manage.py pack`).
    """
    instructions = _clean_instructions(instructions)
    status = Status.PENDING
    if trigger != Trigger.MANUAL:
        if summary_quota_remaining(conversation=conversation) <= 0:
            logger.info("summary not started for conversation %s: %s", conversation.pk, summary_quota_reason())
            return None
        confirm = UserSettings.objects.filter(user_id=conversation.owner_id, confirm_compaction=True).exists()
        if confirm:
            if summary_ask_silenced(conversation=conversation):
                logger.info("summary not asked for conversation %s: \"Not now\" holds", conversation.pk)
                return None
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
        if trigger == Trigger.MANUAL:
            _compaction_merge(job=existing, instructions=instructions)
        return existing
    if status == Status.PENDING and publish:
        job_id = job.pk
        transaction.on_commit(lambda: summary_job_enqueue(job_id=job_id))
    return job


def _compaction_merge(*, job: SummaryJob, instructions: str) -> None:
    """Make a job that has not started yet the compaction the user asked for, with their instructions
    (a started one keeps its own). An automatic job left as it was would summarize only what the window
    left behind and leave the window where it is: the click would compact nothing, or be cancelled
    with nothing to summarize."""
    fields: dict[str, str] = {"trigger": Trigger.MANUAL}
    if instructions:  # a second click without any keeps the first one's
        fields["instructions"] = instructions
    updated = SummaryJob.objects.filter(
        pk=job.pk, status__in=[Status.PENDING, Status.QUEUED, Status.AWAITING_CONFIRMATION]
    ).update(**fields)
    if updated:
        for name, value in fields.items():
            setattr(job, name, value)


def conversation_compact(*, conversation: Conversation, instructions: str = "") -> SummaryJob:
    """"Compact now" / `/compact [instructions]`: summarize at once, whatever the quota.

    A job waiting for confirmation is confirmed (with the instructions); a job that is queued becomes
    this compaction (with the instructions); a running compaction is returned as is (asked other
    instructions, it refuses them); otherwise a manual job is created, unless there is nothing to
    summarize or an automatic summary is being written (ValidationError: the request is refused, not
    queued to be cancelled or lost).
    """
    instructions = _clean_instructions(instructions)
    with transaction.atomic():
        # Deleted in another tab since the request found it: a 404, not "Nothing to summarize yet"
        # (its messages are gone) nor a job inserted for a chat no longer there.
        _conversation_lock(conversation_id=conversation.pk, missing="No Conversation matches the given query.")
        return _compact_locked(conversation=conversation, instructions=instructions)


def _compact_locked(*, conversation: Conversation, instructions: str) -> SummaryJob:
    confirmed = SummaryJob.objects.filter(
        conversation=conversation, status=Status.AWAITING_CONFIRMATION
    ).update(status=Status.PENDING, trigger=Trigger.MANUAL, instructions=instructions)
    job = summary_job_active(conversation=conversation) if confirmed else None
    if job is not None:
        job_id = job.pk
        transaction.on_commit(lambda: summary_job_enqueue(job_id=job_id))
        return job
    if summary_job_active(conversation=conversation) is None and not manual_span_exists(conversation=conversation):
        raise ValidationError(
            f"Nothing to summarize yet: /compact keeps your newest {settings.SUMMARY_MANUAL_KEEP_ROUNDS} exchanges "
            "word for word, and there is nothing older to summarize (or it is summarized already)."
        )
    for _ in range(3):
        job = summary_job_request(conversation=conversation, trigger=Trigger.MANUAL, instructions=instructions)
        if job is not None and job.trigger != Trigger.MANUAL:
            # Started already, as an automatic one: it summarizes only what the window left behind and
            # moves no window; handing it back would drop this compaction and its instructions unsaid.
            raise ValidationError(
                "An automatic summary is being written right now: compact again once it is done (in a moment).",
                code="busy",
            )
        if job is not None and job.status == Status.RUNNING and instructions and instructions != job.instructions:
            # A compaction being written keeps its own instructions: handing it back would clear the
            # box and lose these ones unsaid (a second click asking nothing new still gets it).
            asked = f"with other instructions (“{job.instructions}”)" if job.instructions else "without instructions"
            raise ValidationError(
                f"A compaction is being written right now {asked}: compact again once it is done (in a moment).",
                code="busy",
            )
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


# What an edited copy keeps of its summary: the new text stands for the same messages, written the
# same way (the header line, rebuilt for the new text, says so too).
_KEPT_BY_AN_EDIT = (
    "conversation_id", "model", "covers_from_id", "covers_through_id", "covered_message_count", "source_chars",
    "extractive", "skipped_pin_ids",
)


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
        header = summary_header_for(conversation_id=conversation.pk, covers_from=summary.covers_from_id,
                         covers_through=summary.covers_through_id, covered=summary.covered_message_count or 0,
                         source_chars=summary.source_chars or 0, body=body)
    else:
        header = optimizer.summary_header(covered_messages=summary.covered_message_count or 0,
                                          source_chars=summary.source_chars or 0, summary_chars=len(body))
    content = f"{header}\n\n{body}"
    chat_target = llm_target_for(config=conversation_config(conversation=conversation))
    token_count = optimizer.count_message({"role": "system", "content": content}, model=chat_target.model)
    with transaction.atomic():
        # The conversation's row first, as a branch switch and summary_save take it: a switch cannot
        # take the summary off the path between this check and the edited copy's insert (the copy
        # would stay on a path whose messages it does not cover).
        _conversation_lock(conversation_id=summary.conversation_id, missing="No such summary.")
        # Locks the old summary so two edits at once cannot both replace it (the loser gets the error).
        current = (
            Message.objects.select_for_update()
            .filter(pk=summary.pk, kind=Message.Kind.SUMMARY, discarded=False, superseded=False)
            .first()
        )
        newer = Message.objects.filter(
            conversation_id=summary.conversation_id, kind=Message.Kind.SUMMARY, discarded=False, superseded=False,
            id__gt=summary.pk,
        ).exists()
        if current is None or newer:
            raise ValidationError(
                "Only the summary in use can be edited; this one was discarded or replaced by a newer one.",
                code="not_current",
            )
        if current.content == content:
            return current
        edited = summary_row_create(
            content=content,
            token_count=token_count,
            **{name: getattr(current, name) for name in _KEPT_BY_AN_EDIT},
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
    kept = Message.objects.filter(conversation_id=summary.conversation_id, kind=Message.Kind.SUMMARY, discarded=False)
    with transaction.atomic():
        # The conversation's row first, as summary_save and summary_edit take it: a job saving now waits
        # for this discard and sees it (SummaryChangedError) instead of reading the summary as kept and
        # writing one that folds the discarded text in (it would also lock in the other order). The
        # chain is read under it: an edit another tab saved just before is in it, not left in use.
        _conversation_lock(conversation_id=summary.conversation_id, missing="No such summary.")
        chain = summary_edit_chain(summary=summary)
        in_use = kept.filter(superseded=False).select_for_update().order_by("-id").values_list("id", flat=True).first()
        # Off the path too (a tab left behind by an edit or a switch elsewhere): left as it was, it came
        # back in use with its branch, though the answer to the discard had been a 200.
        kept.filter(id__in=chain).update(discarded=True, updated_at=timezone.now())
        if in_use in chain:
            Conversation.objects.filter(pk=summary.conversation_id).update(window_start_id=None)
    try:
        summary.refresh_from_db()
    except Message.DoesNotExist:  # the chat was deleted the moment the discard was done
        raise Http404("No such summary.") from None
    return summary


def _conversation_lock(*, conversation_id: int, missing: str) -> None:
    """Lock the chat's row until the transaction ends. Http404 (`missing`, the answer to what never was)
    when another tab deleted the chat since the request found it (services._conversation_save)."""
    if Conversation.objects.select_for_update().filter(pk=conversation_id).values_list("pk", flat=True).first() is None:
        raise Http404(missing)
