"""`manage.py pack`: the `python -m optimizer pack` contract, answered by the web app's request path.

Same input, flags, output lines and errors as the optimizer's CLI (`optimizer/cli.py`; its parsing
and validation are reused, not copied). The difference is who packs: each request's conversation is
stored in the database and packed by `context_build` (chatapp/chat/context.py) exactly as a chat
turn packs its newest message — stored counts, the static layer and window read through the
database, the stored window state, the app's recall source and summaries — minus the model call.

How a request becomes a chat turn, and why:

* A throwaway user is created for the run and deleted afterwards with everything it owns (its
  conversations, their messages, summaries and jobs), also when a request is refused; nothing else
  in the database is read or written. Each request gets its own conversation, deleted once answered,
  so the database never holds more than one request's messages.
* Messages are stored as `message_append` stores them (chat, complete, token and character counts
  for the request's model, running totals on the conversation, the full-text index recall reads)
  but in one bulk insert and one index rebuild: a request can carry thousands of messages.
  `created_at` is auto_now_add, so dates given in the request are written by updates afterwards,
  one per distinct date (naive dates are taken as UTC). A request's `window_start` is stored as the
  conversation's window.
* The model: `context_budget` is context window - reserved output, so the target's window is the
  request's budget plus the reserve and the budget comes out exactly as asked. The conversation has
  no model config, so a summary job finds "no model configured" and writes the app's extractive
  summary (its token count uses the offline model's tokenizer, o200k_base, as in the app).
* `--summarizer extractive`: when the turn decides to summarize and reports a span, the summary job
  is requested as the request path requests it (without publishing it to a broker) and run at once
  with `summary_job_run`, then the turn is packed again: the answer is what the next turn sends
  with the summary in place. `none`: the span is only reported, as by the CLI.
* Output ids are the request's own: database ids are mapped back. A summary names the messages it
  covers (the CLI does the same), not the summary row. `name` is not stored by the app and is not
  echoed; `tool` messages and non-text content have no place in the app's conversations and are
  refused as bad input, as is text the database cannot store (a NUL, a lone surrogate), which the
  message API refuses too.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

import optimizer
from chatapp.chat.context_pack import context_build
from chatapp.chat.layout import row_is_static
from chatapp.chat.models import Conversation, Message, SummaryJob
from chatapp.chat.search_services import conversation_index_rebuild
from chatapp.chat.selectors import user_settings_get
from chatapp.chat.services import user_settings_update
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import summary_job_request
from chatapp.chat.textsafe import text_problem
from chatapp.providers.llm import LLMTarget, offline_target
from optimizer.cli import BadRequest, PackRequest, add_pack_arguments, parse_request, result_dict, run_pack
from optimizer.types import ContextTooLargeError, PackResult

PROG = "manage.py pack"
# Reserved reply tokens of the run's target; any value works, the window is budget + this.
REPLY_RESERVE = optimizer.PackConfig().reserved_output
USERNAME_PREFIX = "manage-py-pack-"
# Summaries written for one request at most (see _Turns._summarize_and_rebuild).
MAX_SUMMARY_ROUNDS = 3
# Stats entries holding message ids (lists of ids end in _ids; the window start is one id).
_ID_LIST_SUFFIX = "_ids"
_ID_SCALARS = ("window_start",)
_IN_CHUNK = 900


class Command(BaseCommand):
    help = (
        "Pack chat requests (JSON or JSON lines, the `python -m optimizer pack` contract) through the web "
        "app's request path: each conversation is stored under a throwaway user and packed as a chat turn."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_pack_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        flags = argparse.Namespace(**{k: options[k] for k in ("input", "budget", "preference", "model", "summarizer")})
        owner = _throwaway_user()
        try:
            turn = _Turns(owner=owner)
            code = run_pack(flags, lambda req, at: turn.answer(req, at, flags), prog=PROG,
                            out=self.stdout, err=self.stderr)
        finally:
            owner.delete()  # cascades to everything it owns
        if code:
            raise SystemExit(code)


def _throwaway_user() -> Any:
    user = get_user_model().objects.create_user(username=f"{USERNAME_PREFIX}{uuid.uuid4().hex[:16]}")
    user.set_unusable_password()
    user.save(update_fields=["password"])
    return user


def _aware(when: dt.datetime) -> dt.datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def target_for_budget(*, model: str, budget: int) -> LLMTarget:
    """A target whose `context_budget` is exactly `budget` (window = budget + reply reserve)."""
    return dataclasses.replace(
        offline_target(), model=model, max_output_tokens=REPLY_RESERVE, context_window=budget + REPLY_RESERVE,
        label=PROG,
    )


@dataclasses.dataclass(slots=True)
class _Stored:
    conversation: Conversation
    to_request_id: dict[str, str]  # database id (str) -> request id
    rows: list[Message]
    summary_message_id: int | None = None  # the summary row the turn sent, if any (ContextInput's)


class _Turns:
    """Answers requests one at a time for one throwaway user."""

    def __init__(self, *, owner: Any) -> None:
        self.owner = owner
        self.preference: str | None = None

    def answer(self, req: Any, where: str, flags: argparse.Namespace) -> dict[str, Any]:
        r = parse_request(req, where, flags)
        _check_storable(r, where)
        if r.preference != self.preference:  # the turn reads the user's settings, as a chat turn does
            user_settings_update(user=self.owner, preference=r.preference)
            self.preference = r.preference
        stored: _Stored | None = None
        try:
            with transaction.atomic():  # one commit for the turn's writes (a commit costs an fsync)
                stored = _store(owner=self.owner, r=r)
                result = self._build(stored, r)
            if r.summarizer == "extractive":
                result = self._summarize_and_rebuild(stored, r, result)
            # ids are mapped while the rows exist: a summary's covered range is read from its row
            return result_dict(r.id, _with_request_ids(result, stored))
        except ContextTooLargeError as exc:
            raise BadRequest(where, f"context too large: {exc}") from None
        finally:
            if stored is not None:
                stored.conversation.delete()

    def _build(self, stored: _Stored, r: PackRequest) -> PackResult:
        prefs = user_settings_get(user=self.owner)
        result, ctx = context_build(
            conversation=stored.conversation,
            preference=prefs.preference,
            target=target_for_budget(model=r.model, budget=r.budget),
            auto_optimize=prefs.auto_optimize,
            # a request without window state is a first cut, whatever the summary rounds stored since
            recall_fill=r.window_start is None,
        )
        stored.summary_message_id = ctx.summary_message_id
        return result

    def _summarize_and_rebuild(self, stored: _Stored, r: PackRequest, result: PackResult) -> PackResult:
        """As if the summary workers had caught up (the CLI's `extractive`): while the turn asks for a
        summary, write it with the app's job runner and pack the next turn with it in place.

        One round is usually enough; a second happens when the summary's arrival pushes the next turn
        over the trigger again (the window then moves once more). The app's daily summary quota
        bounds the rounds as it bounds a real conversation's, and MAX_SUMMARY_ROUNDS in any case.
        """
        conversation = stored.conversation
        for _ in range(MAX_SUMMARY_ROUNDS):
            if not _wants_summary(result):
                break
            job = summary_job_request(
                conversation=conversation, span=result.summary_span, trigger=SummaryJob.Trigger.AUTO, publish=False
            )
            if job is None:  # quota used (or confirmation asked): the app would not summarize either
                break
            target = target_for_budget(model=r.model, budget=r.budget)
            if summary_job_run(job_id=job.pk, chat_target=target).summary_id is None:
                break
            conversation.refresh_from_db()  # the job counted the summary; the turn reads stored state
            result = self._build(stored, r)
            # written for this request, as the CLI reports it
            result = dataclasses.replace(result, info=dataclasses.replace(result.info, summary_generated=True))
        return result


def _check_storable(r: PackRequest, where: str) -> None:
    for m in r.messages:
        if m.role not in Message.Role.values:
            raise BadRequest(where, f"message {m.id!r}: role {m.role!r} has no place in the app's conversations")
        if not isinstance(m.content, str):
            raise BadRequest(where, f"message {m.id!r}: the app stores text content only")
        # refused as the message API refuses it: a lone surrogate failed the insert with a traceback
        problem = text_problem(m.content)
        if problem is not None:
            raise BadRequest(where, f"message {m.id!r}: {problem}")


def _store(*, owner: Any, r: PackRequest) -> _Stored:
    """The request's conversation as the app stores one (see the module docstring)."""
    counts = [optimizer.count_message({"role": m.role, "content": m.content}, model=r.model) for m in r.messages]
    chars = [len(m.content) for m in r.messages]
    conversation = Conversation.objects.create(
        owner=owner,
        live_message_count=len(r.messages),
        live_char_count=sum(chars),
        live_token_count=sum(counts),
    )
    rows = Message.objects.bulk_create([
        Message(conversation=conversation, role=m.role, content=m.content, token_count=n, char_count=c,
                pinned=m.pinned)
        for m, n, c in zip(r.messages, counts, chars, strict=True)
    ])
    # One UPDATE per distinct date: conversations come in sessions sharing a date, and this is much
    # cheaper than bulk_update's per-row CASE expression.
    by_date: dict[dt.datetime, list[int]] = {}
    for row, m in zip(rows, r.messages, strict=True):
        if m.created_at is not None:
            by_date.setdefault(_aware(m.created_at), []).append(row.pk)
    for when, pks in by_date.items():
        for k in range(0, len(pks), _IN_CHUNK):  # bounded IN lists (SQLite caps bound parameters)
            Message.objects.filter(pk__in=pks[k : k + _IN_CHUNK]).update(created_at=when)
    # The full-text index and BM25 statistics that recall reads: message_append keeps them per message;
    # for a bulk write the app's own rebuild does the same in one pass.
    conversation_index_rebuild(conversation=conversation)
    to_request_id = {str(row.pk): m.id for row, m in zip(rows, r.messages, strict=True)}
    if r.window_start is not None:
        by_request_id = {v: int(k) for k, v in to_request_id.items()}
        start = by_request_id.get(r.window_start)
        if start is not None:  # an unknown id means no window, as the optimizer treats it
            conversation.window_start_id = start
            Conversation.objects.filter(pk=conversation.pk).update(window_start_id=start)
    return _Stored(conversation=conversation, to_request_id=to_request_id, rows=rows)


def _wants_summary(result: PackResult) -> bool:
    """The request path's condition for requesting a summary job (chat_turn.turn_prepare)."""
    return result.info.strategy_chosen == "summarize" and result.summary_span is not None


def _summary_covers(stored: _Stored) -> list[str]:
    """Request ids of the messages the sent summary covers: its id range minus the static layer,
    which the summary job never summarizes (system messages, pins, the first user message)."""
    if stored.summary_message_id is None:
        return []
    row = (
        Message.objects.filter(pk=stored.summary_message_id)
        .values_list("covers_from_id", "covers_through_id").first()
    )
    if row is None or row[0] is None or row[1] is None:
        return []
    first_user = next((m.pk for m in stored.rows if m.role == Message.Role.USER), None)
    return [
        stored.to_request_id[str(m.pk)] for m in stored.rows
        if row[0] <= m.pk <= row[1]
        and not row_is_static(pk=m.pk, role=m.role, pinned=m.pinned, first_user_id=first_user)
    ]


def _with_request_ids(result: PackResult, stored: _Stored) -> PackResult:
    """`result` with every database id replaced by the request's id for that message."""
    assert stored is not None
    ids = stored.to_request_id

    def one(i: str) -> str:
        # An id that is no request message (none is expected) must not pass for one: mark it.
        return ids.get(str(i), f"db:{i}")

    messages = []
    for p in result.messages:
        if p.origin == "summary":
            covered = _summary_covers(stored)
            source = tuple(covered) or tuple(one(i) for i in p.source_ids)
        else:
            source = tuple(one(i) for i in p.source_ids)
        messages.append(dataclasses.replace(p, source_ids=source))
    changes = {}
    for f in dataclasses.fields(result.info):
        value = getattr(result.info, f.name)
        if f.name.endswith(_ID_LIST_SUFFIX) and isinstance(value, tuple):
            changes[f.name] = tuple(one(i) for i in value)
        elif f.name in _ID_SCALARS and value is not None:
            changes[f.name] = one(value)
    info = dataclasses.replace(result.info, **changes)
    span = result.summary_span
    if span is not None:
        span = dataclasses.replace(
            span,
            after_id=None if span.after_id is None else one(span.after_id),
            through_id=one(span.through_id),
            ids=tuple(one(i) for i in span.ids),
        )
    return dataclasses.replace(result, messages=messages, info=info, summary_span=span,
                               window_start=None if result.window_start is None else one(result.window_start),
                               removed_ids=[one(i) for i in result.removed_ids])


__all__ = ["Command", "target_for_budget"]
