"""Summary services, selectors and API in-process (no worker): quota, confirmation, one active job,
claim and fencing, span planning, extractive fallback, edit / discard, sweep, ownership."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

import optimizer
from chatapp.chat import summary_runner, summary_services, summary_writing
from chatapp.chat.context import context_load
from chatapp.chat.models import Conversation, Message, SummaryJob, UserSettings
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_selectors import summary_current, summary_quota_remaining
from chatapp.chat.summary_services import (
    compact_command_parse,
    conversation_compact,
    summary_discard,
    summary_edit,
    summary_job_request,
    summary_jobs_sweep,
)
from chatapp.chat.tasks import summarize_conversation
from chatapp.providers.llm import OFFLINE_MODEL
from chatapp.providers.models import LLMConfig
from tests.support.accounts import token_client
from tests.support.chat import send
from tests.support.wire import head, wire_server
from tests.support.worker import summaries_of, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _finish(job: SummaryJob) -> None:
    SummaryJob.objects.filter(pk=job.pk).update(status=SummaryJob.Status.DONE, finished_at=timezone.now())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/compact", ""),
        ("  /compact keep all the SQL we wrote ", "keep all the SQL we wrote"),
        ("/COMPACT\nkeep names", "keep names"),
        ("/compacted", None),
        ("please /compact", None),
        ("hello", None),
    ],
)
def test_compact_command_parse(text, expected):
    assert compact_command_parse(text=text) == expected


def test_one_active_job_per_conversation_is_enforced_by_the_database(owner, long_conversation, published):
    conversation = long_conversation(config=None)
    first = summary_job_request(conversation=conversation, trigger="auto")
    again = summary_job_request(conversation=conversation, trigger="auto")
    assert again.pk == first.pk and published == [first.pk]
    with pytest.raises(IntegrityError), transaction.atomic():
        SummaryJob.objects.create(conversation=conversation, status=SummaryJob.Status.RUNNING)


def test_daily_quota_limits_automatic_jobs_but_not_manual_ones(owner, long_conversation, published, settings):
    settings.SUMMARIES_PER_DAY = 2
    conversation = long_conversation(config=None)
    for _ in range(2):
        job = summary_job_request(conversation=conversation, trigger="auto")
        assert job is not None
        _finish(job)
    assert summary_quota_remaining(conversation=conversation) == 0
    assert summary_job_request(conversation=conversation, trigger="ahead") is None
    manual = conversation_compact(conversation=conversation, instructions="keep ids")
    assert manual.trigger == "manual" and manual.instructions == "keep ids"
    # A day later the quota is back.
    SummaryJob.objects.update(created_at=timezone.now() - timedelta(days=1, minutes=1))
    assert summary_quota_remaining(conversation=conversation) == 2


def test_confirm_before_compaction_waits_then_compact_now_confirms(owner, long_conversation, published):
    UserSettings.objects.update_or_create(user=owner, defaults={"confirm_compaction": True})
    conversation = long_conversation(config=None)
    job = summary_job_request(conversation=conversation, trigger="auto")
    assert job.status == SummaryJob.Status.AWAITING_CONFIRMATION and published == []
    confirmed = conversation_compact(conversation=conversation, instructions="keep all the SQL")
    assert confirmed.pk == job.pk and published == [job.pk]
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.QUEUED and job.instructions == "keep all the SQL"


def test_instructions_reach_a_job_that_has_not_started(owner, long_conversation, published):
    conversation = long_conversation(config=None)
    job = summary_job_request(conversation=conversation, trigger="auto")
    clicked = conversation_compact(conversation=conversation, instructions="keep the invoice numbers")
    assert clicked.pk == job.pk
    job.refresh_from_db()
    assert job.instructions == "keep the invoice numbers"


def test_other_instructions_while_a_compaction_is_written_are_refused_not_dropped(owner, long_conversation, published):
    """`/compact keep the SQL` while an earlier `/compact keep ids` was being written answered 202 with
    that job: the page said "Compacting with your instructions." and cleared the box, and the new
    instructions were lost. They are refused now, so the page gives them back; a second click that
    asks nothing new still gets the running job."""
    conversation = long_conversation(config=None)
    job = conversation_compact(conversation=conversation, instructions="keep ids")
    SummaryJob.objects.filter(pk=job.pk).update(status=SummaryJob.Status.RUNNING, attempts=1)
    with pytest.raises(ValidationError, match="keep ids"):
        conversation_compact(conversation=conversation, instructions="keep the SQL")
    job.refresh_from_db()
    assert job.instructions == "keep ids"
    assert conversation_compact(conversation=conversation, instructions="").pk == job.pk
    assert conversation_compact(conversation=conversation, instructions="keep ids").pk == job.pk


def test_offline_run_writes_extractive_summary_of_the_evicted_span_only(owner, long_conversation, published):
    conversation = long_conversation(config=None, rounds=10, window_rounds=3)
    replies = list(conversation.messages.filter(role="assistant").order_by("id"))
    Message.objects.filter(pk=replies[1].pk).update(role="system")  # message 4: a system message
    Message.objects.filter(pk=replies[2].pk).update(pinned=True)  # message 6: pinned
    job = summary_job_request(conversation=conversation, trigger="auto")
    outcome = summary_job_run(job_id=job.pk)
    assert outcome.status == "done"
    job.refresh_from_db()
    summary = job.summary
    assert summary.kind == "summary" and summary.role == "system" and summary.extractive
    assert summary.model == "extractive" and summary.token_count > 0
    assert summary.content.startswith("[Conversation summary \u2014 covers messages 2\u201314, ")
    assert summary.covers_through_id < conversation.window_start_id
    # 14 evicted, minus the static layer: the first user message, the system message, the pinned reply.
    assert summary.covered_message_count == 11
    assert job.started_at and job.finished_at and job.attempts == 1
    assert Message.objects.filter(conversation=conversation, kind="chat").count() == 20  # originals kept
    # A second delivery of the same message does nothing.
    assert summary_job_run(job_id=job.pk).status == "skipped"
    assert len(summaries_of(conversation)) == 1
    # The request path now uses it.
    ctx = context_load(conversation=conversation)
    assert ctx.summary is not None and ctx.summary.id == str(summary.pk)


def test_model_summary_records_usage_and_the_instructions(
    owner, make_config, long_conversation, fake_openai, published
):
    fake_openai.reset()
    conversation = long_conversation(config=make_config("fake-echo"))
    job = conversation_compact(conversation=conversation, instructions="keep all the SQL")
    assert summary_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    assert job.model == "fake-echo" and job.prompt_tokens and job.completion_tokens
    assert not job.summary.extractive
    sent = fake_openai.requests[-1].messages
    assert "keep all the SQL" in sent[0]["content"]
    # A manual compaction moves the verbatim window past what it covered.
    conversation.refresh_from_db()
    assert conversation.window_start_id > job.summary.covers_through_id


def test_a_running_job_is_not_claimed_twice_until_its_lease_expires(owner, long_conversation, published):
    conversation = long_conversation(config=None)
    job = summary_job_request(conversation=conversation, trigger="auto")
    SummaryJob.objects.filter(pk=job.pk).update(
        status=SummaryJob.Status.RUNNING, attempts=1, lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    held = summary_job_run(job_id=job.pk)
    assert held.status == "retry" and 290 < held.retry_in < 302  # comes back when the holder's lease ends
    SummaryJob.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert summary_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    assert job.attempts == 2 and len(summaries_of(conversation)) == 1


def test_retryable_model_error_releases_the_job_for_a_retry(
    owner, make_config, long_conversation, fake_openai, published
):
    conversation = long_conversation(config=make_config("fail-500"))
    job = summary_job_request(conversation=conversation, trigger="auto")
    outcome = summary_job_run(job_id=job.pk)
    assert outcome.status == "retry" and outcome.retry_in > 0
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.QUEUED and "Attempt 1 failed" in job.error
    assert summaries_of(conversation) == []


def test_a_garbled_json_answer_is_retried_like_any_model_failure_not_a_crash(
    owner, make_config, long_conversation, published
):
    """A 200 labelled JSON whose body does not parse (a gateway's plain text, a garbled answer) crashed the
    delivery: the job failed as an internal error, with neither a retry nor the extractive summary."""
    body = b"upstream connect error or disconnect/reset before headers"
    answer = [head(content_type="application/json", chunked_body=False, length=len(body)), body]
    with wire_server((answer, False)) as server:
        config = make_config("m")
        LLMConfig.objects.filter(pk=config.pk).update(base_url=server.base_url)
        conversation = long_conversation(config=config)
        job = summary_job_request(conversation=conversation, trigger="auto")
        outcome = summary_job_run(job_id=job.pk)
    assert outcome.status == "retry"
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.QUEUED and "not valid JSON" in job.error


def test_a_summary_cut_at_its_output_limit_is_not_saved_as_a_whole_one(
    owner, make_config, long_conversation, fake_openai, published, settings
):
    """A model that writes past the summary's max_tokens (a verbose local model, inline thinking that
    counts against the limit) ends with finish_reason "length": its summary stopped mid-sentence, and
    everything the span held after that point was gone from the chat's context, with nothing to say so.
    It is retried as an empty summary is, then the extractive summary stands in."""
    settings.SUMMARY_MAX_RETRIES = 0
    # `verbatim-0` answers the prompt's transcript word for word: longer than the summary's limit.
    conversation = long_conversation(config=make_config("verbatim-0"), rounds=30)
    job = summary_job_request(conversation=conversation, trigger="auto")
    summary_job_run(job_id=job.pk)

    asked = fake_openai.completions[-1]
    assert asked.body["max_tokens"] < len(asked.messages[-1]["content"].split())  # the model was cut
    [summary] = summaries_of(conversation)
    assert summary.extractive
    job.refresh_from_db()
    assert "cut at its output limit" in job.error


def test_a_job_records_what_each_of_its_model_calls_spent_also_when_no_model_summary_is_kept(
    owner, make_config, long_conversation, fake_openai, published, settings
):
    """Every answered call is billed: one whose summary was empty or cut, and so retried, and the last
    one before the extractive summary stood in, recorded nothing, and the dashboard's summary cost (the
    jobs' sum) left them out."""
    settings.SUMMARY_MAX_RETRIES = 1
    conversation = long_conversation(config=make_config("verbatim-0"), rounds=30)  # cut every time
    job = summary_job_request(conversation=conversation, trigger="auto")
    fake_openai.reset()
    assert summary_job_run(job_id=job.pk).status == "retry"
    summary_job_run(job_id=job.pk)

    [summary] = summaries_of(conversation)
    assert summary.extractive
    calls = fake_openai.completions
    job.refresh_from_db()
    assert len(calls) == 2
    assert job.prompt_tokens == sum(optimizer.count_messages(c.messages, model="verbatim-0") for c in calls)
    assert job.completion_tokens and job.completion_tokens > calls[0].body["max_tokens"]  # both calls'


def test_edit_and_discard(owner, long_conversation, published):
    conversation = long_conversation(config=None)
    job = summary_job_request(conversation=conversation, trigger="auto")
    summary_job_run(job_id=job.pk)
    summary = summary_current(conversation=conversation)
    original = summary.content
    text = "[Conversation summary — edited]\n\nOnly INV-1003 matters. " * 5
    edited = summary_edit(summary=summary, content=text)
    # A new summary with the same coverage replaces the old one, which is kept unchanged (discarded),
    # so a record that sent the old text still points at exactly that text.
    assert edited.pk != summary.pk and edited.edited and edited.edited_from_id == summary.pk
    # the header is the app's, rebuilt: the user's text is the body, counted as the header says
    body = text.strip().split("\n", 1)[1].strip()
    assert edited.content.endswith("\n\n" + body) and edited.token_count != summary.token_count
    header = edited.content.split("\n", 1)[0]
    assert header.startswith("[Conversation summary — covers messages ") and header.count("[") == 1
    assert header.endswith(f" → {len(body):,} characters]")
    assert header.split(",")[0] == original.split("\n", 1)[0].split(",")[0]  # same messages covered
    assert (edited.covers_from_id, edited.covers_through_id, edited.covered_message_count) == (
        summary.covers_from_id, summary.covers_through_id, summary.covered_message_count
    )
    old = Message.objects.get(pk=summary.pk)
    assert old.content == original and old.discarded and not old.edited
    assert summary_current(conversation=conversation).pk == edited.pk
    assert context_load(conversation=conversation).summary.content == edited.content
    with pytest.raises(Exception, match="empty"):
        summary_edit(summary=edited, content="   ")
    with pytest.raises(Exception, match="Only the summary in use"):
        summary_edit(summary=old, content="resurrect the old one")
    # Editing again replaces the edit; the rolling summarizer folds the newest text.
    again = summary_edit(summary=edited, content="Only INV-1004 matters.")
    assert summary_current(conversation=conversation).pk == again.pk
    assert Message.objects.get(pk=edited.pk).discarded
    summary_discard(summary=again)
    assert summary_current(conversation=conversation) is None
    assert context_load(conversation=conversation).summary is None
    assert Message.objects.filter(pk=again.pk, discarded=True).exists()  # kept, not deleted
    assert Message.objects.filter(conversation=conversation, kind="summary").count() == 3


def test_sweep_publishes_pending_and_stale_jobs_and_expires_questions(owner, long_conversation, published, settings):
    a = long_conversation(config=None)
    b = long_conversation(config=None)
    c = long_conversation(config=None)
    pending = SummaryJob.objects.create(conversation=a, status=SummaryJob.Status.PENDING)
    stale = SummaryJob.objects.create(
        conversation=b, status=SummaryJob.Status.RUNNING, lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    question = SummaryJob.objects.create(conversation=c, status=SummaryJob.Status.AWAITING_CONFIRMATION)
    SummaryJob.objects.filter(pk=question.pk).update(created_at=timezone.now() - timedelta(days=2))
    result = summary_jobs_sweep()
    assert sorted(published) == sorted([pending.pk, stale.pk])
    assert result["expired"] == 1
    question.refresh_from_db()
    assert question.status == SummaryJob.Status.CANCELLED


def test_unreachable_broker_leaves_the_job_pending(owner, long_conversation, settings):
    from chatapp.celery import app
    from tests.support.worker import celery_use_broker

    conversation = long_conversation(config=None)
    saved = (app.conf.broker_url, dict(app.conf.broker_transport_options or {}))
    celery_use_broker(url="redis://127.0.0.1:9/0", options={"socket_connect_timeout": 1})
    try:
        job = summary_job_request(conversation=conversation, trigger="auto")
        job.refresh_from_db()
        assert job.status == SummaryJob.Status.PENDING
        assert summary_jobs_sweep()["published"] == 0
    finally:
        celery_use_broker(url=saved[0], options=saved[1])


# --- API -----------------------------------------------------------------------------------------


def test_api_compact_jobs_edit_discard_and_ownership(owner, long_conversation, published):
    conversation = long_conversation(config=None)
    api = token_client(owner)
    compact_url = f"/api/conversations/{conversation.pk}/compact/"
    response = api.post(compact_url, {"content": "/compact keep SQL"}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued" and body["instructions"] == "keep SQL" and body["trigger"] == "manual"
    summary_job_run(job_id=body["id"])

    jobs = api.get(f"/api/conversations/{conversation.pk}/summary-jobs/").json()
    [job] = jobs["results"]
    assert job["status"] == "done" and job["duration_ms"] is not None and job["extractive"] is True
    assert jobs["quota_remaining"] >= 0
    summary_id = job["summary_id"]

    edited = api.patch(f"/api/summaries/{summary_id}/", {"content": "Short summary."}, format="json")
    assert edited.status_code == 200 and edited.json()["edited"] is True
    assert edited.json()["id"] != summary_id == Message.objects.get(pk=edited.json()["id"]).edited_from_id
    stale = api.patch(f"/api/summaries/{summary_id}/", {"content": "Again."}, format="json")
    assert stale.status_code == 400 and "in use" in str(stale.json())
    assert api.patch(f"/api/summaries/{summary_id}/", {"content": ""}, format="json").status_code == 400

    mallory = token_client(get_user_model().objects.create_user(username="mallory", password="x-long-password-1"))
    assert mallory.post(f"/api/conversations/{conversation.pk}/compact/", {}, format="json").status_code == 404
    assert mallory.get(f"/api/conversations/{conversation.pk}/summary-jobs/").status_code == 404
    assert mallory.patch(f"/api/summaries/{summary_id}/", {"content": "x"}, format="json").status_code == 404
    assert mallory.delete(f"/api/summaries/{summary_id}/").status_code == 404
    plain = conversation.messages.filter(kind="chat").first()
    assert api.delete(f"/api/summaries/{plain.pk}/").status_code == 404  # not a summary

    # Discarding by the id the page showed before the edit discards the edited text as well.
    discarded = api.delete(f"/api/summaries/{summary_id}/")
    assert discarded.status_code == 200 and discarded.json()["discarded"] is True
    assert summary_current(conversation=conversation) is None
    assert api.post(compact_url, {"content": "hi"}, format="json").status_code == 400


def test_compact_with_nothing_to_summarize_is_refused_up_front(owner, long_conversation, published):
    """Too short a chat, or one whose older part is summarized already: the request is refused with
    the reason (the composer gives the text back) instead of a job queued only to be cancelled."""
    api = token_client(owner)
    short = long_conversation(config=None, rounds=2, window_rounds=2)
    response = api.post(f"/api/conversations/{short.pk}/compact/", {"content": "/compact"}, format="json")
    assert response.status_code == 400 and "Nothing to summarize yet" in str(response.json())
    assert not SummaryJob.objects.filter(conversation=short).exists() and published == []

    conversation = long_conversation(config=None)
    job = conversation_compact(conversation=conversation)
    assert summary_job_run(job_id=job.pk).status == "done"
    again = api.post(f"/api/conversations/{conversation.pk}/compact/", {}, format="json")
    assert again.status_code == 400 and "Nothing to summarize yet" in str(again.json())
    assert list(SummaryJob.objects.filter(conversation=conversation).values_list("status", flat=True)) == ["done"]


def test_a_summary_for_a_real_model_leaves_the_demo_replies_out(
    owner, make_config, long_conversation, fake_openai, published
):
    """A chat begun with the offline demo model, then switched to a real one: the demo's replies are
    never history for the real model, so its summary neither reads nor quotes them."""
    conversation = long_conversation(config=make_config("fake-echo"))
    demo = list(conversation.messages.filter(role="assistant").order_by("id")[:4])
    for reply in demo:
        reply.model, reply.content = OFFLINE_MODEL, f"Offline demo reply number {reply.pk}."
        reply.save(update_fields=["model", "content"])
    fake_openai.reset()
    job = conversation_compact(conversation=conversation)
    planned = summary_writing.span_plan(job=job, conversation=conversation)
    assert planned is not None and planned.rows
    assert not {m.pk for m in planned.rows} & {m.pk for m in demo}
    assert summary_job_run(job_id=job.pk).status == "done"
    prompt = "\n".join(str(m["content"]) for m in fake_openai.requests[-1].messages)
    assert "Offline demo reply" not in prompt and "INV-1001" in prompt


def test_a_summary_written_on_the_demo_leaves_its_replies_out_too(owner, make_config, fake_openai, published,
                                                                  settings):
    """Compacted on the demo, then switched to a real model: the summary goes along, so it holds the
    user's messages only (the demo's replies describe the context; quoted, they crowded out the user's)."""
    settings.SEND_RATE_LIMIT_PER_MINUTE = 1000
    conversation = Conversation.objects.create(owner=owner, title="Demo first", offline=True)
    for i in range(12):
        facts = " ".join(f"the cabinet {i}-{j} is oak, {40 + j} cm wide" for j in range(6))
        assert send(owner, conversation, f"Kitchen plan {i}: {facts}.").named("done")
    demo_lines = {line for reply in conversation.messages.filter(role="assistant", model=OFFLINE_MODEL)
                  for line in reply.content.splitlines() if len(line.strip()) > 20}
    assert demo_lines
    job = conversation_compact(conversation=conversation)
    assert summary_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    summary = job.summary.content
    assert not [line for line in demo_lines if line.strip() in summary] and "Kitchen plan" in summary
    # the demo's reply just before the window is passed over, not left for a later summary to read
    conversation.refresh_from_db()
    before_window = conversation.messages.filter(kind="chat", id__lt=conversation.window_start_id).order_by("-id")
    assert before_window[0].model == OFFLINE_MODEL and job.summary.covers_through_id == before_window[0].pk

    Conversation.objects.filter(pk=conversation.pk).update(offline=False, llm_config=make_config("fake-echo"))
    fake_openai.reset()
    assert send(owner, conversation, "What about the oak cabinets?").named("done")
    sent = "\n".join(str(m["content"]) for m in fake_openai.requests[-1].messages)
    assert summary in sent and not [line for line in demo_lines if line.strip() in sent]


def test_a_compaction_whose_summary_is_not_shorter_changes_nothing(
    owner, make_config, long_conversation, fake_openai, published
):
    """A manual compaction sends its summary instead of the messages it covers from the next request
    on: one that came out no shorter than them is not saved, and says why."""
    conversation = long_conversation(config=make_config("fake-echo"), rounds=3, window_rounds=1)
    window_before = conversation.window_start_id
    job = conversation_compact(conversation=conversation)
    outcome = summary_job_run(job_id=job.pk)
    assert outcome.status == "cancelled"
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.CANCELLED and "no shorter than" in job.error
    assert job.model == "fake-echo" and job.completion_tokens  # the call it made is still accounted for
    conversation.refresh_from_db()
    assert conversation.window_start_id == window_before and conversation.summary_count == 0
    assert summaries_of(conversation) == []


def test_sweep_command(owner, long_conversation, published):
    from io import StringIO

    from django.core.management import call_command

    pending = SummaryJob.objects.create(conversation=long_conversation(config=None), status=SummaryJob.Status.PENDING)
    out = StringIO()
    call_command("summary_sweep", stdout=out)
    assert published == [pending.pk] and "1 of 1 summary jobs published" in out.getvalue()
    pending.refresh_from_db()
    assert pending.status == SummaryJob.Status.QUEUED


# --- span bounds, lease renewal, summary count ---------------------------------------------------


def _chat_ids(conversation) -> list[int]:
    return list(conversation.messages.filter(kind="chat").order_by("id").values_list("id", flat=True))


def test_planned_span_starts_at_the_first_message_after_the_exclusive_lower_bound(owner, long_conversation, published):
    from optimizer import SummarySpan

    conversation = long_conversation(config=None, rounds=12, window_rounds=3)
    ids = _chat_ids(conversation)  # ids[0] is the first user message: static, never in a span
    # The request saw only a partial view: `ids` starts well after the span's real start.
    in_view = tuple(str(i) for i in ids[6:10])
    job = summary_job_request(
        conversation=conversation, span=SummarySpan(after_id=None, through_id=str(ids[9]), ids=in_view)
    )
    assert (job.span_from_id, job.span_through_id) == (ids[1], ids[9])
    _finish(job)
    job = summary_job_request(
        conversation=conversation, span=SummarySpan(after_id=str(ids[3]), through_id=str(ids[9]), ids=in_view)
    )
    assert (job.span_from_id, job.span_through_id) == (ids[4], ids[9])
    _finish(job)


def test_planned_span_bounds_do_not_assume_contiguous_ids(owner, long_conversation, published):
    from chatapp.chat.message_services import message_append
    from optimizer import SummarySpan

    conversation = long_conversation(config=None, rounds=3, window_rounds=1)
    last = _chat_ids(conversation)[-1]
    long_conversation(config=None, rounds=3)  # another conversation takes the next ids
    later = [
        message_append(conversation=conversation, role=role, content=f"later {role}", token_model="gpt-4o-mini").pk
        for role in ("user", "assistant", "user", "assistant")
    ]
    assert later[0] > last + 1
    span = SummarySpan(after_id=str(last), through_id=str(later[1]), ids=(str(later[1]),))
    job = summary_job_request(conversation=conversation, span=span)
    assert (job.span_from_id, job.span_through_id) == (later[0], later[1])


@pytest.fixture
def multi_chunk_job(make_config, long_conversation, published) -> SummaryJob:
    """An automatic job on the fake endpoint whose span is several chunks, i.e. several model calls in
    one delivery (a small window)."""
    config = make_config("fake-echo")
    LLMConfig.objects.filter(pk=config.pk).update(context_window=1000, max_output_tokens=200)
    conversation = long_conversation(config=LLMConfig.objects.get(pk=config.pk), rounds=40, window_rounds=3)
    return summary_job_request(conversation=conversation, trigger="auto")


def test_the_lease_is_renewed_before_every_model_call(multi_chunk_job, monkeypatch):
    from chatapp.chat.summary_selectors import summary_jobs_to_sweep

    job = multi_chunk_job
    real_call = summary_writing.llm_complete
    held: list[bool] = []

    def slow_call(**kwargs):
        lease = SummaryJob.objects.get(pk=job.pk).lease_expires_at
        held.append(lease > timezone.now() and job.pk not in summary_jobs_to_sweep())
        done = real_call(**kwargs)
        # The call outlasted the lease: unless it is renewed, the sweep hands the job to another delivery.
        SummaryJob.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        return done

    monkeypatch.setattr(summary_writing, "llm_complete", slow_call)
    outcome = summary_job_run(job_id=job.pk)
    assert outcome.status == "done", outcome.detail
    assert len(held) >= 2 and all(held), held
    assert len(summaries_of(job.conversation)) == 1


def test_a_delivery_that_lost_its_job_stops_calling_the_model(multi_chunk_job, monkeypatch):
    from django.db.models import F

    job = multi_chunk_job
    real_call = summary_writing.llm_complete
    calls: list[int] = []

    def call(**kwargs):
        calls.append(1)
        if len(calls) == 1:  # meanwhile the lease ran out and another delivery claimed the job
            SummaryJob.objects.filter(pk=job.pk).update(attempts=F("attempts") + 1)
        return real_call(**kwargs)

    monkeypatch.setattr(summary_writing, "llm_complete", call)
    outcome = summary_job_run(job_id=job.pk)
    assert outcome.status == "skipped"
    assert len(calls) == 1  # no further chunk was sent for a result that would be thrown away
    assert summaries_of(job.conversation) == []


def test_summary_count_counts_summaries_written_not_requested(owner, long_conversation, published):
    conversation = long_conversation(config=None)
    job = summary_job_request(conversation=conversation, trigger="auto")
    conversation.refresh_from_db()
    assert conversation.summary_count == 0  # requested, not written yet
    assert summary_job_run(job_id=job.pk).status == "done"
    conversation.refresh_from_db()
    assert conversation.summary_count == 1
    assert summary_job_run(job_id=job.pk).status == "skipped"  # a duplicate delivery writes nothing
    cancelled = summary_job_request(conversation=conversation, trigger="auto")  # nothing new to cover
    assert summary_job_run(job_id=cancelled.pk).status == "cancelled"
    conversation.refresh_from_db()
    assert conversation.summary_count == 1


@pytest.mark.parametrize("preference", ["fast", "balanced", "quality"])
def test_after_compact_now_the_next_turn_sends_the_summary_whatever_the_preference(
    owner, fake_openai, published, settings, preference
):
    from chatapp.chat.models import Conversation, OptimizationRecord
    from tests.support.chat import make_config as chat_config
    from tests.support.chat import seed_messages, send

    settings.SEND_RATE_LIMIT_PER_MINUTE = 1000
    UserSettings.objects.update_or_create(user=owner, defaults={"preference": preference})
    conversation = Conversation.objects.create(owner=owner, llm_config=chat_config(owner, fake_openai.base_url))
    seed_messages(conversation, 12)
    job = conversation_compact(conversation=conversation)
    assert summary_job_run(job_id=job.pk).status == "done"
    summary = summary_current(conversation=conversation)

    reply = send(owner, conversation, "And the next step?")
    assert reply.status == 200 and reply.named("done"), reply.events
    sent = fake_openai.requests[-1].messages
    assert [m["content"] for m in sent if m["role"] == "system"] == [summary.content]
    record = OptimizationRecord.objects.filter(conversation=conversation).order_by("-id").first()
    assert record.summary_id == summary.pk


def test_a_job_waiting_for_the_user_s_running_one_is_not_published_again(owner, long_conversation, published):
    """Its message comes back every few seconds while the other job runs: the job is alive, and the sweep
    must not take its message for lost (it published one more every SUMMARY_QUEUED_STALE_SECONDS)."""
    hung = summary_job_request(conversation=long_conversation(config=None), trigger="auto")
    SummaryJob.objects.filter(pk=hung.pk).update(
        status=SummaryJob.Status.RUNNING, attempts=1, lease_expires_at=timezone.now() + timedelta(hours=1))
    second = summary_job_request(conversation=long_conversation(config=None), trigger="manual")
    # Queued a while ago: its lease is about to end.
    SummaryJob.objects.filter(pk=second.pk).update(status=SummaryJob.Status.QUEUED,
                                                   lease_expires_at=timezone.now() + timedelta(seconds=1))

    assert summary_job_run(job_id=second.pk).status == "retry"

    second.refresh_from_db()
    assert second.lease_expires_at > timezone.now() + timedelta(seconds=60)
    assert second.pk not in summary_services.summary_jobs_to_sweep()


def test_one_running_summary_per_user_lets_other_users_through(owner, long_conversation, published):
    """Issue 11, finding 5: a user whose endpoint hangs holds one worker at most; their next job
    waits (queued, no attempt used) while another user's job runs at once."""
    hung = summary_job_request(conversation=long_conversation(config=None), trigger="auto")
    SummaryJob.objects.filter(pk=hung.pk).update(  # as a worker stuck on a dead endpoint leaves it
        status=SummaryJob.Status.RUNNING, attempts=1, lease_expires_at=timezone.now() + timedelta(minutes=5))
    second = summary_job_request(conversation=long_conversation(config=None), trigger="manual")

    waited = summary_job_run(job_id=second.pk)

    assert waited.status == "retry" and waited.retry_in > 0
    second.refresh_from_db()
    assert second.attempts == 0 and second.status != SummaryJob.Status.RUNNING
    other = get_user_model().objects.create_user(username="other-user", password="a long enough password")
    theirs = Conversation.objects.create(owner=other, title="Theirs")
    for k in range(12):
        Message.objects.create(conversation=theirs, role="user", content=f"question {k} about invoices")
        Message.objects.create(conversation=theirs, role="assistant", content=f"answer {k} about invoices")
    Conversation.objects.filter(pk=theirs.pk).update(live_message_count=24)
    job = summary_job_request(conversation=theirs, trigger="manual")
    ran = summary_job_run(job_id=job.pk)
    assert ran.status == "done", ran


@pytest.mark.parametrize("change", ["edit", "discard"])
def test_a_summary_changed_while_a_job_writes_the_next_one_is_not_overwritten(
    owner, make_config, long_conversation, fake_openai, published, monkeypatch, change
):
    """The user edits (or discards) the summary in use while a job is folding more messages into
    it: the job saves nothing and is planned again from what the user left."""
    conversation = long_conversation(config=make_config("fake-echo"), rounds=14, window_rounds=6)
    assert summary_job_run(job_id=summary_job_request(conversation=conversation, trigger="auto").pk).status == "done"
    first = summary_current(conversation=conversation)
    users = list(conversation.messages.filter(role="user").order_by("id").values_list("id", flat=True))
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=users[-2])  # a later cut
    job = summary_job_request(conversation=conversation, trigger="auto")
    real_call = summary_writing.llm_complete
    changed: list[Message | None] = []

    def call_while_the_user_changes_it(**kwargs):
        if not changed and change == "edit":  # the PATCH lands while the model writes
            changed.append(summary_edit(summary=first, content="Corrected: only INV-1003 matters."))
        elif not changed:  # or the DELETE
            summary_discard(summary=first)
            changed.append(None)
        return real_call(**kwargs)

    monkeypatch.setattr(summary_writing, "llm_complete", call_while_the_user_changes_it)
    outcome = summary_job_run(job_id=job.pk)

    assert outcome.status == "retry", outcome
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.QUEUED and "edited or discarded" in job.error
    kept = summary_current(conversation=conversation)
    assert (kept.pk if kept else None) == (changed[0].pk if change == "edit" else None)  # the user's change stands
    fake_openai.reset()
    assert summary_job_run(job_id=job.pk).status in ("done", "cancelled")  # planned again
    prompts = "\n".join(m["content"] for r in fake_openai.requests for m in r.messages)
    assert optimizer.summary_body(first.content) not in prompts  # the replaced text is never folded in again
    if change == "edit":
        assert "Corrected: only INV-1003 matters." in prompts
        assert summary_current(conversation=conversation).covers_from_id == first.covers_from_id


def _taken_over_then_crash(job_id: int):
    """What a delivery sees when it was paused past its lease: another one claimed the job meanwhile
    (attempt 2), then this one's next database call fails (its connection was closed under it)."""

    def crash(**kwargs):
        SummaryJob.objects.filter(pk=job_id).update(attempts=2, lease_expires_at=timezone.now() + timedelta(minutes=5))
        raise OperationalError("server closed the connection unexpectedly")

    return crash


def test_a_delivery_that_crashes_after_a_takeover_leaves_the_job_to_its_new_holder(
    owner, long_conversation, published, monkeypatch
):
    conversation = long_conversation(config=None)
    job = summary_job_request(conversation=conversation, trigger="auto")
    monkeypatch.setattr(summary_runner, "span_plan", _taken_over_then_crash(job.pk))
    with pytest.raises(OperationalError):
        summarize_conversation(job.pk)
    job.refresh_from_db()
    # Failing it would refuse the new holder's summary (its save is fenced on a running job).
    assert (job.status, job.attempts, job.error) == (SummaryJob.Status.RUNNING, 2, "")


def test_a_delivery_that_crashes_holding_the_job_fails_it_with_the_reason(
    owner, long_conversation, published, monkeypatch
):
    conversation = long_conversation(config=None)
    job = summary_job_request(conversation=conversation, trigger="auto")

    def crash(**kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(summary_runner, "span_plan", crash)
    with pytest.raises(RuntimeError):
        summarize_conversation(job.pk)
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.FAILED and "Internal error while summarizing (RuntimeError)" in job.error
    assert job.lease_expires_at is None and job.finished_at is not None


def test_a_job_saving_while_a_discard_commits_does_not_fold_the_discarded_text(
    owner, long_conversation, published, monkeypatch
):
    """The worker's save lands while the user's DELETE is inside its transaction (the summaries locked,
    not yet marked discarded): the save waits for it, sees the discard and saves nothing. Without that
    wait, PostgreSQL let the save read the summary as still kept and write one folding its text."""
    conversation = long_conversation(config=None, rounds=14, window_rounds=6)
    assert summary_job_run(job_id=summary_job_request(conversation=conversation, trigger="auto").pk).status == "done"
    first = summary_current(conversation=conversation)
    users = list(conversation.messages.filter(role="user").order_by("id").values_list("id", flat=True))
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=users[-2])  # a later cut
    job = summary_job_request(conversation=conversation, trigger="auto")
    outcomes: list[str] = []

    def run_job() -> None:
        try:
            outcomes.append(summary_job_run(job_id=job.pk).status)
        finally:
            connection.close()

    class DiscardPausing:
        """summary_discard's clock, read inside its transaction just before it marks the summaries."""

        @staticmethod
        def now():
            worker = threading.Thread(target=run_job)
            worker.start()
            worker.join(timeout=3)  # the save finishes now, or waits for this transaction
            monkeypatch.setattr(summary_services, "timezone", timezone)
            return timezone.now()

    monkeypatch.setattr(summary_services, "timezone", DiscardPausing)
    summary_discard(summary=first)
    wait_for(lambda: outcomes, timeout=30, what="the job's delivery")
    assert summaries_of(conversation) == [first]  # nothing written from the discarded text
    job.refresh_from_db()
    if outcomes == ["retry"]:  # PostgreSQL: the save waited for the discard (SummaryChangedError)
        assert job.status == SummaryJob.Status.QUEUED and "edited or discarded" in job.error
    else:  # SQLite: the whole delivery waited (write transactions are serial), then found nothing to do
        assert outcomes == ["cancelled"] and job.status == SummaryJob.Status.CANCELLED


def test_compact_now_while_an_automatic_job_is_queued_compacts_as_asked(owner, long_conversation, published):
    """An automatic job waits in the queue (it would summarize only what the window left behind) when
    the user asks to compact now: the job the click gets back keeps only the newest rounds word for
    word and moves the window past what it summarized, as a compaction of its own would."""
    conversation = long_conversation(config=None, rounds=12, window_rounds=6)
    automatic = summary_job_request(conversation=conversation, trigger="auto")
    clicked = conversation_compact(conversation=conversation)
    assert clicked.pk == automatic.pk
    assert summary_job_run(job_id=clicked.pk).status == "done"
    users = list(conversation.messages.filter(role="user").order_by("id").values_list("id", flat=True))
    conversation.refresh_from_db()
    summary = summary_current(conversation=conversation)
    assert conversation.window_start_id == users[-2]  # the newest 2 rounds kept word for word
    assert summary.covers_through_id == users[-2] - 1


def test_a_rate_limited_job_waits_as_long_as_the_endpoint_asks(
    owner, make_config, long_conversation, fake_openai, published, settings
):
    """A 429 says when to come back (`Retry-After: 2`): a retry sooner is refused again, and the retries
    run out against the limit and leave an extractive summary where the model would have written one."""
    settings.SUMMARY_RETRY_BACKOFF_MS = 100
    conversation = long_conversation(config=make_config("fail-429"))
    job = summary_job_request(conversation=conversation, trigger="auto")
    outcome = summary_job_run(job_id=job.pk)
    assert outcome.status == "retry" and outcome.retry_in >= 2
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.QUEUED and "Retrying in 2.0 s" in job.error


def test_compact_now_while_an_automatic_job_runs_is_refused_with_the_reason(owner, long_conversation, published):
    """A started automatic job cannot become a compaction (its span is planned): handed back, the click
    would compact nothing and drop its instructions. It is refused, saying why, and taken once the job is done."""
    conversation = long_conversation(config=None, rounds=12, window_rounds=6)
    automatic = summary_job_request(conversation=conversation, trigger="auto")
    SummaryJob.objects.filter(pk=automatic.pk).update(status=SummaryJob.Status.RUNNING)

    with pytest.raises(ValidationError, match="automatic summary is being written right now"):
        conversation_compact(conversation=conversation, instructions="Keep the dates.")

    SummaryJob.objects.filter(pk=automatic.pk).update(status=SummaryJob.Status.DONE)
    clicked = conversation_compact(conversation=conversation, instructions="Keep the dates.")
    assert clicked.pk != automatic.pk
    assert (clicked.trigger, clicked.instructions) == ("manual", "Keep the dates.")
