"""Writing a summary: the span a job covers (`span_plan`), the model call in chunks under a lease,
the extractive fallback's header, and the save, fenced by the attempt that claimed the job.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Max, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

import optimizer
from chatapp.chat.context import first_user_message_id, live_chat_q, offline_reply_q
from chatapp.chat.context_images import messages_with_placeholders
from chatapp.chat.layout import static_layer_q
from chatapp.chat.models import Conversation, Message, SummaryJob
from chatapp.chat.selectors import message_numbers
from chatapp.chat.summary_selectors import summary_current
from chatapp.chat.textsafe import text_storable
from chatapp.dashboard.costs import money
from chatapp.providers.llm import llm_complete
from optimizer.types import Msg

Status, Trigger = SummaryJob.Status, SummaryJob.Trigger


# Share of the summary model's window one summarizing call may fill with span messages; the rest is
# instructions, the previous summary and the reply.
_CHUNK_SHARE = 0.6


class SummaryChangedError(Exception):
    """The summary a job folded its span into was edited or discarded (or another one was written)
    while the job ran: saving would bring the old text back over the user's change."""


class SummaryNotShorterError(Exception):
    """A compaction's summary came out no shorter than what it would stand in for (the span and the
    summary it folds in): sending it instead of them would make every request larger."""

    def __init__(self, *, tokens: int, replaced: int) -> None:
        super().__init__(
            f"The summary came out at {tokens:,} tokens, no shorter than the {replaced:,} tokens of what it "
            "would replace, so nothing was compacted: the messages stay as they are."
        )


@dataclass(slots=True)
class SpanPlan:
    rows: list[Message]
    previous: Message | None
    upper_exclusive: int
    # The pins the summary will not hold (Message.skipped_pin_ids): those in its span, and the
    # previous summary's that are still pinned.
    skipped_pin_ids: list[int]
    # A manual compaction's: the path's newest message below `upper_exclusive` when planned. The window
    # moves to `upper_exclusive` only while the path below it is still this one (summary_save).
    path_below_upper: int | None = None


def _path_below(*, conversation_id: int, upper: int) -> int | None:
    """The id of the newest message of the path shown below `upper`. A path is a chain in id order, so
    the same id means the same path below `upper`."""
    return (Message.objects.filter(conversation_id=conversation_id, kind=Message.Kind.CHAT, superseded=False,
                                   id__lt=upper).order_by("-id").values_list("id", flat=True).first())


def span_plan(*, job: SummaryJob, conversation: Conversation) -> SpanPlan | None:
    """Re-plan the span from the database as it is now (the conversation may have moved since).

    Span = live chat messages after the newest summary's covered range and before the verbatim
    window, minus the static layer (system messages, pins, the first user message), which is always
    sent anyway; and the messages the newest summary passed over as pinned that have been unpinned
    since (no summary holds them: they were sent as themselves until this one folds them in). A
    manual compaction ends the span before the newest SUMMARY_MANUAL_KEEP_ROUNDS rounds (or the
    window start, whichever is later).
    """
    found = _span_rows(job=job, conversation=conversation)
    if found is None:
        return None
    rows, previous, upper, candidates = found
    return SpanPlan(
        # Text only, each image a placeholder: the summarizer is not sent images.
        rows=messages_with_placeholders(list(rows.order_by("id").only("id", "role", "content", "token_count",
                                        "char_count", "created_at")), has_images=conversation.has_images),
        previous=previous,
        upper_exclusive=upper,
        # A system message is sent whether pinned or not: never listed (as by migration 0013 and imports).
        skipped_pin_ids=list(candidates.filter(pinned=True).exclude(role=Message.Role.SYSTEM)
                             .order_by("id").values_list("id", flat=True)),
        path_below_upper=(_path_below(conversation_id=conversation.pk, upper=upper)
                          if job.trigger == Trigger.MANUAL else None),
    )


def manual_span_exists(*, conversation: Conversation) -> bool:
    """Whether a compaction asked for now would find anything to summarize (`span_plan`'s rule)."""
    found = _span_rows(job=SummaryJob(conversation=conversation, trigger=Trigger.MANUAL), conversation=conversation)
    return found is not None and found[0].exists()


def _span_rows(
    *, job: SummaryJob, conversation: Conversation
) -> tuple[QuerySet[Message], Message | None, int, QuerySet[Message]] | None:
    """(the span's rows, unordered; the summary it extends; its exclusive upper id; the rows the span
    is chosen from, static ones included), or None: no span."""
    # The offline demo model's replies are never history for a real model (context_load), nor in a
    # summary; not even in one written while the chat is on the demo, since the chat may move to a real
    # model and take its summary along. They describe the context, not the conversation: quoted, they
    # crowded out the user's own messages.
    live = Message.objects.filter(live_chat_q(), conversation=conversation).exclude(offline_reply_q())
    upper = conversation.window_start_id
    planned = job.span_through_id
    if planned is not None and not Message.objects.filter(live_chat_q(), pk=planned).exists():
        # Planned on a branch the user has left since (a switch or an edit): its ids bound nothing on
        # the path shown now, which may lie wholly below them.
        planned = None
    if upper is None and planned is not None:
        upper = planned + 1
    if job.trigger == Trigger.AHEAD and planned is not None:
        # Ahead of need: the span the next request will evict is still inside today's window.
        upper = max(upper or 0, planned + 1)
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
    passed_over = previous.skipped_pin_ids if previous is not None and previous.skipped_pin_ids else []
    candidates = live.filter(Q(id__gt=lower, id__lt=upper) | Q(id__in=passed_over))
    return candidates.exclude(static_layer_q(first_user_id=first_user_id)), previous, upper, candidates


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
class ModelSummary:
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
    held = SummaryJob.objects.filter(pk=job.pk, status=Status.RUNNING, attempts=job.attempts)
    return bool(held.update(lease_expires_at=lease))


class LeaseLostError(Exception):
    """Another delivery owns the job now; this one stops without writing anything."""


def model_summarize(
    *, job: SummaryJob, target, msgs: list[Msg], previous: str | None, instructions: str, chat_budget: int
) -> ModelSummary:
    """Fold the span into the previous summary with the model, one call per window-sized chunk.

    The job's lease is renewed before every call, so a long span on a slow model is not taken for a
    dead worker by the sweep; raises LeaseLostError if the job was taken over meanwhile.
    """
    prev_tokens = optimizer.count_text(previous, model=target.model) if previous else 0
    limit = max(1024, int(target.context_window * _CHUNK_SHARE) - prev_tokens)
    # A message longer than a chunk (a pasted log) would go alone in a call over the model's window,
    # which the endpoint refuses: it is read as the chat sends it, head and tail (optimizer.truncation).
    msgs = [_within(msg, limit=limit, model=target.model) for msg in msgs]
    result = ModelSummary(text=previous or "", model=target.model)
    cost: float | None = 0.0
    for chunk in _chunks(msgs, limit=limit):
        if not _lease_renew(job=job):
            raise LeaseLostError
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
        call_cost = optimizer.cost_usd(target.model, prompt_tokens=completion.prompt_tokens or 0,
                                       completion_tokens=completion.completion_tokens or 0,
                                       cached_tokens=completion.cached_tokens or 0,
                                       # priced as the window was found: by the endpoint's host
                                       provider=optimizer.provider_for_base_url(target.base_url))
        # Billed whether its summary is kept or not (empty, cut, a later chunk failing): on the job at once,
        # whose figures the dashboard's summary cost sums.
        _spent_add(job=job, completion=completion, cost=call_cost)
        text = text_storable((completion.text or "").strip())
        # A summary cut at its limit stops mid-sentence: what the span held after that point would be lost.
        if not text or completion.finish_reason == "length":
            raise EmptySummaryError("The model's summary was cut at its output limit." if text else
                                    "The model returned an empty summary.")
        result.text = text
        result.model = completion.model or target.model
        result.prompt_tokens += completion.prompt_tokens or 0
        result.completion_tokens += completion.completion_tokens or 0
        cost = None if cost is None or call_cost is None else cost + call_cost
    result.cost_usd = cost
    return result


def _spent_add(*, job: SummaryJob, completion: Any, cost: float | None) -> None:
    """Add one answered call's usage to its job's (null until the first: a job that made none)."""
    spent: dict[str, Any] = {name: Coalesce(F(name), 0) + (getattr(completion, name) or 0)
                             for name in ("prompt_tokens", "completion_tokens")}
    if cost is not None:
        spent["cost_usd"] = Coalesce(F("cost_usd"), money(0.0)) + money(cost)
    SummaryJob.objects.filter(pk=job.pk).update(**spent)


def _within(msg: Msg, *, limit: int, model: str) -> Msg:
    """`msg` shortened to at most `limit` tokens of content (itself when it fits)."""
    if not isinstance(msg.content, str):
        return msg
    content = optimizer.compress_text(msg.content, limit=limit, model=model)
    if content is msg.content:
        return msg
    shortened = replace(msg, content=content, chars=None)
    return replace(shortened, tokens=optimizer.count_message(shortened, model=model))  # chunks add these up


class EmptySummaryError(Exception):
    """An empty reply, or one cut at its output limit: treated like a transient model failure (retried,
    then extractive)."""


def summary_header_for(*, conversation_id: int, covers_from: int, covers_through: int, covered: int, source_chars: int,
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


def summary_row_create(*, content: str, token_count: int, **fields: Any) -> Message:
    """A summary's row: a system message of kind summary, its counts stored with it (`token_count` is
    counted by the caller, before its transaction). Not indexed (search_services): a summary is
    neither a recall candidate nor a search hit."""
    return Message.objects.create(
        role=Message.Role.SYSTEM,
        kind=Message.Kind.SUMMARY,
        content=content,
        token_count=token_count,
        char_count=len(content),
        **fields,
    )


def _summary_changed(*, conversation_id: int, previous: Message | None) -> bool:
    """Whether the summary the plan read is no longer the newest one kept: an edit or a discard marks
    it discarded, and a summary written since has a larger id."""
    kept = Message.objects.filter(conversation_id=conversation_id, kind=Message.Kind.SUMMARY, discarded=False)
    if previous is None:
        return kept.filter(superseded=False).exists()
    return not kept.filter(pk=previous.pk).exists() or kept.filter(pk__gt=previous.pk, superseded=False).exists()


def _sent_tokens(message: Message, *, model: str) -> int:
    """A message's stored count, or its count now for a row written without one."""
    return message.token_count or optimizer.count_message({"role": message.role, "content": message.content},
                                                          model=model)


def summary_save(
    *,
    job: SummaryJob,
    plan: SpanPlan,
    result: ModelSummary,
    extractive: bool,
    chat_model: str,
    status: str,
    note: str,
) -> Message | None:
    """Write the summary and finish the job in one transaction, only if this attempt still owns the
    job (the fencing check), so no interleaving of deliveries can write two summaries.

    Raises SummaryChangedError, writing nothing, when the summary the plan folded was edited or
    discarded meanwhile: the user's change stands, and the job is planned again from it; and
    SummaryNotShorterError, writing nothing, when a manual compaction's summary would not save a token."""
    conversation = job.conversation
    previous = plan.previous
    covers_from = previous.covers_from_id if previous is not None and previous.covers_from_id else plan.rows[0].pk
    # A span may hold only messages unpinned below the previous summary's end: the coverage never shrinks.
    covers_through = max(plan.rows[-1].pk, (previous.covers_through_id or 0) if previous is not None else 0)
    if conversation.offline_reply_count:
        # The demo's replies are never read (_span_rows), but passed over all the same: one after the last
        # message read is covered, or the chat would say a later summary is still to read it.
        passed = Message.objects.filter(live_chat_q(), offline_reply_q(), conversation=conversation,
                                        id__gt=covers_through, id__lt=plan.upper_exclusive)
        covers_through = passed.aggregate(last=Max("id"))["last"] or covers_through
    covered = (previous.covered_message_count or 0 if previous is not None else 0) + len(plan.rows)
    source_chars = (previous.source_chars or 0 if previous is not None else 0) + sum(
        r.char_count or len(r.content) for r in plan.rows
    )
    header = summary_header_for(conversation_id=conversation.pk, covers_from=covers_from, covers_through=covers_through,
                     covered=covered, source_chars=source_chars, body=result.text)
    content = f"{header}\n\n{result.text}"
    token_count = optimizer.count_message({"role": "system", "content": content}, model=chat_model)
    if job.trigger == Trigger.MANUAL:
        # A manual compaction moves the window past its span, so the summary is sent in its place from
        # the next request on. (An automatic one stands in for messages the window has left anyway.)
        replaced = sum(_sent_tokens(r, model=chat_model) for r in [*plan.rows, *([previous] if previous else [])])
        if token_count >= replaced:
            raise SummaryNotShorterError(tokens=token_count, replaced=replaced)
    with transaction.atomic():
        # The conversation's row first, as a branch switch takes it (turn_claim.turn_busy_check): a switch
        # then cannot move the path between the check below and this summary's commit.
        Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("pk", flat=True).first()
        owner = (
            SummaryJob.objects.select_for_update()
            .filter(pk=job.pk, status=Status.RUNNING, attempts=job.attempts)
            .first()
        )
        if owner is None:
            return None
        if _summary_changed(conversation_id=conversation.pk, previous=previous):
            raise SummaryChangedError
        # Written for the path it read: if its last covered message left the active path meanwhile (an
        # edit or a branch switch), it goes with that branch, never sent on the path now shown.
        hidden_with = (
            Message.objects.filter(pk=covers_through, superseded=True).values_list("off_path_by", flat=True).first()
        )
        summary = summary_row_create(
            content=content,
            token_count=token_count,
            superseded=hidden_with is not None,
            off_path_by=hidden_with,
            conversation=conversation,
            model=result.model,
            prompt_tokens=result.prompt_tokens if not extractive else None,
            completion_tokens=result.completion_tokens if not extractive else None,
            covers_from_id=covers_from,
            covers_through_id=covers_through,
            covered_message_count=covered,
            source_chars=source_chars,
            extractive=extractive,
            cost_usd=money(result.cost_usd),
            skipped_pin_ids=plan.skipped_pin_ids or None,
        )
        if (job.trigger == Trigger.MANUAL and hidden_with is None
                and _path_below(conversation_id=conversation.pk, upper=plan.upper_exclusive) == plan.path_below_upper):
            # A manual compaction moves the verbatim window past what it summarized, so the next
            # request sends the summary instead of those messages (an automatic one follows the window).
            # Not for a summary that went with a branch left meanwhile, nor when a switch changed the
            # path below the rounds kept (a branch parting after the span): the planned ids would put the
            # window past messages of the path shown that no summary holds (the switch cleared the
            # window: the next request refits it).
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
            finished_at=timezone.now(),
            lease_expires_at=None,
        )
    return summary
