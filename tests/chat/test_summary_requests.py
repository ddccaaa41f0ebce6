"""Summary jobs from the request path (issue 4): after commit and off the response's critical path,
ahead of need, within the daily quota; and records that keep rebuilding what the model saw when a
summary is edited (issue 5).

Transactional: the job is requested after the turn commits, from a thread of its own.
"""

from __future__ import annotations

import socket
import threading

import pytest

from chatapp.chat import summary_services
from chatapp.chat.chat_turn import chat_turn_start, turn_pack
from chatapp.chat.gauge import context_gauge
from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob, UserSettings
from chatapp.chat.summary_requests import summary_request_submit, summary_requests_wait
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_selectors import summary_current, summary_quota_reason
from chatapp.chat.summary_services import summary_edit
from tests.support.chat import make_config, seed_messages, send

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def quality_user(user):
    UserSettings.objects.update_or_create(user=user, defaults={"preference": "quality"})
    return user


@pytest.fixture
def long_chat(quality_user, fake_openai):
    """600 messages on a 5,000-token budget: the next request triggers and the selector summarizes."""
    config = make_config(quality_user, fake_openai.base_url, model="gpt-4o-mini", window=6_000, max_output=1_000)
    conversation = Conversation.objects.create(owner=quality_user, llm_config=config)
    ids = seed_messages(conversation, 600, model="gpt-4o-mini")
    return conversation, ids


def _jobs(conversation: Conversation) -> list[SummaryJob]:
    assert summary_requests_wait(timeout=30)
    return list(SummaryJob.objects.filter(conversation=conversation).order_by("id"))


def test_summarize_decision_requests_a_job_after_commit(quality_user, long_chat, published):
    conversation, ids = long_chat
    submitted: list[dict] = []
    real_submit = summary_request_submit

    def spy(**kwargs):
        submitted.append(kwargs)
        real_submit(**kwargs)

    from chatapp.chat import chat_turn

    original = chat_turn.summary_request_submit
    chat_turn.summary_request_submit = spy
    try:
        from django.db import transaction

        with transaction.atomic():
            start = chat_turn_start(user=quality_user, conversation=conversation, content="and the plan?")
            turn = turn_pack(start=start)
            assert not submitted, "the job is requested only once the turn is committed"
    finally:
        chat_turn.summary_request_submit = original
    [job] = _jobs(conversation)
    record = OptimizationRecord.objects.get(pk=turn.record_id)
    assert record.strategy == "summarize" and submitted[0]["trigger"] == "auto"
    conversation.refresh_from_db()
    assert job.trigger == "auto" and job.span_through_id < conversation.window_start_id
    # With no summary yet the span runs from the start (the job re-reads by id).
    assert ids[1] <= job.span_from_id
    assert published == [job.pk]
    # A summarize decision is not a summary made: the worker counts summaries when it saves one.
    assert conversation.summary_count == 0 and conversation.truncation_count == 0


def test_an_unreachable_broker_never_delays_the_start_of_the_reply(quality_user, long_chat, monkeypatch):
    """A broker that accepts connections and never answers (black-holed): the reply starts while the
    publish is still stuck, and the job waits as pending for the sweep."""
    from chatapp.celery import app
    from tests.support.worker import celery_use_broker

    conversation, _ = long_chat
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(8)  # never accepted, never answered
    saved = (app.conf.broker_url, dict(app.conf.broker_transport_options or {}))
    celery_use_broker(
        url=f"redis://127.0.0.1:{hole.getsockname()[1]}/0",
        options={"socket_connect_timeout": 1, "socket_timeout": 1, "max_retries": 0},
    )
    order: list[str] = []
    release = threading.Event()
    real_publish = summary_services._publish

    def stuck_publish(*, job_ids):
        order.append("publish begins")
        release.wait(timeout=30)  # held until the test has read the whole reply
        try:
            return real_publish(job_ids=job_ids)
        finally:
            order.append("publish returns")

    async def on_event(client, name, data):
        order.append(name)

    monkeypatch.setattr(summary_services, "_publish", stuck_publish)
    try:
        result = send(quality_user, conversation, "are you there?", on_event=on_event)
        release.set()
        [job] = _jobs(conversation)
    finally:
        release.set()
        summary_requests_wait(timeout=30)
        celery_use_broker(url=saved[0], options=saved[1])
        hole.close()
    assert result.names[:2] == ["accepted", "start"] and result.names[-1] == "done"
    # The whole reply went out before the publish gave up: it was never on the reply's path.
    assert order.index("done") < order.index("publish returns")
    assert job.status == SummaryJob.Status.PENDING  # the sweep publishes it when the broker is back


def test_quota_used_up_truncates_and_says_why(quality_user, long_chat, published, settings):
    settings.SUMMARIES_PER_DAY = 1
    conversation, _ = long_chat
    SummaryJob.objects.create(conversation=conversation, status=SummaryJob.Status.DONE, trigger="auto")

    result = send(quality_user, conversation, "and now?")
    start = result.named("start")[0]["context"]
    record = OptimizationRecord.objects.get(conversation=conversation)
    assert record.triggered and record.strategy == "truncate"
    assert summary_quota_reason() in record.reason and "no summarizer" not in record.reason
    assert start["strategy"] == "truncate" and summary_quota_reason() in start["reason"]
    assert record.stats["summary_quota_exhausted"] is True
    assert len(_jobs(conversation)) == 1 and published == []  # no new job
    conversation.refresh_from_db()
    assert context_gauge(conversation=conversation, user=quality_user)["strategy"] == "truncate"

    # With quota left the same conversation summarizes.
    settings.SUMMARIES_PER_DAY = 2
    send(quality_user, conversation, "and with quota?")
    assert OptimizationRecord.objects.filter(conversation=conversation).latest("id").reason.find(
        summary_quota_reason()
    ) == -1


def test_summary_requested_ahead_of_need_is_ready_when_the_trigger_fires(quality_user, long_chat, published):
    conversation, _ = long_chat
    # Turn 1 triggers (600 messages): the window moves, an automatic job summarizes what left it.
    first = send(quality_user, conversation, "first")
    assert first.named("start")[0]["context"]["triggered"]
    # The page is told a job is on its way: it is created after the turn, off the stream.
    assert first.named("start")[0]["summary_requested"] is True
    [auto] = _jobs(conversation)
    assert auto.trigger == "auto" and summary_job_run(job_id=auto.pk).status == "done"

    # Then the chat grows until a reply takes the next request past the trigger.
    words = " ".join(f"w{i}" for i in range(40))
    for turn in range(60):
        result = send(quality_user, conversation, f"turn {turn}: {words}")
        assert result.names[-1] == "done"
        jobs = _jobs(conversation)
        if len(jobs) > 1:
            break
    else:
        pytest.fail("no summary was requested ahead of need")
    ahead = jobs[-1]
    assert ahead.trigger == "ahead" and published[-1] == ahead.pk
    # Requested by a turn that was itself below the trigger: ahead of need, as its `done` says.
    assert not result.named("start")[0]["context"]["triggered"]
    assert (result.named("start")[0]["summary_requested"], result.named("done")[0]["summary_requested"]) == (
        False, True)
    conversation.refresh_from_db()
    window_start = conversation.window_start_id
    # It covers what the next request will evict, which is still inside today's window.
    assert ahead.span_through_id >= window_start
    assert summary_job_run(job_id=ahead.pk).status == "done"
    ahead.refresh_from_db()
    assert ahead.summary.covers_through_id >= window_start

    # The next request crosses the trigger and sends that summary.
    nxt = send(quality_user, conversation, "and now?")
    assert nxt.named("start")[0]["context"]["triggered"]
    record = OptimizationRecord.objects.filter(conversation=conversation).latest("id")
    assert record.strategy == "summarize" and record.summary_id == ahead.summary_id
    assert "summary present" in nxt.text


def test_no_ahead_request_without_automatic_optimization(quality_user, long_chat, published):
    conversation, _ = long_chat
    UserSettings.objects.filter(user=quality_user).update(auto_optimize=False)
    for text in ("one", "two", "three"):
        result = send(quality_user, conversation, text)
        assert result.names[-1] == "done"
        assert result.named("start")[0]["summary_requested"] is result.named("done")[0]["summary_requested"] is False
    assert _jobs(conversation) == []


def test_an_edited_summary_leaves_earlier_records_pointing_at_what_was_sent(
    quality_user, long_chat, published, fake_openai
):
    conversation, _ = long_chat
    send(quality_user, conversation, "first")
    [job] = _jobs(conversation)
    summary_job_run(job_id=job.pk)
    summary = summary_current(conversation=conversation)

    fake_openai.reset()
    send(quality_user, conversation, "uses the summary")
    before = OptimizationRecord.objects.filter(conversation=conversation).latest("id")
    sent_text = next(m["content"] for m in fake_openai.completions[-1].messages if m["role"] == "system")
    assert before.summary_id == summary.pk and sent_text == summary.content

    edited = summary_edit(summary=summary, content="[Conversation summary — edited]\n\nOnly INV-7 matters.")
    fake_openai.reset()
    send(quality_user, conversation, "uses the edit")
    after = OptimizationRecord.objects.filter(conversation=conversation).latest("id")
    assert after.summary_id == edited.pk
    assert edited.content in [m["content"] for m in fake_openai.completions[-1].messages]
    # The earlier record still rebuilds exactly: its summary is unchanged.
    before.refresh_from_db()
    assert Message.objects.get(pk=before.summary_id).content == sent_text
