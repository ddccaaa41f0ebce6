"""The chat request path with background summaries: the reply never waits for a summary, a broker that
is down when the job is enqueued loses nothing, and the next turn sends the summary."""

from __future__ import annotations

import pytest

from chatapp.chat.models import Conversation, OptimizationRecord, SummaryJob, UserSettings
from tests.support.chat import make_config as chat_config
from tests.support.chat import seed_messages, send
from tests.support.worker import celery_use_broker, job_finished, summaries_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _no_send_rate_limit(settings):
    settings.SEND_RATE_LIMIT_PER_MINUTE = 1000


def test_chat_answers_with_broker_down_and_next_turn_uses_the_summary(broker, worker, owner, fake_openai):
    UserSettings.objects.update_or_create(user=owner, defaults={"preference": "quality"})
    config = chat_config(owner, fake_openai.base_url, window=4_000, max_output=500)
    conversation = Conversation.objects.create(owner=owner, llm_config=config)
    seed_messages(conversation, 60, words=40)  # well past the trigger: the optimizer chooses summarize

    celery_use_broker(url="redis://127.0.0.1:9/0", options={"socket_connect_timeout": 1})  # broker down
    first = send(owner, conversation, "What did we decide about the invoices?")
    assert first.status == 200 and first.named("done"), first.events
    assert first.named("start")[0]["context"]["strategy"] == "summarize"
    job = SummaryJob.objects.get(conversation=conversation)
    assert job.status == SummaryJob.Status.PENDING and job.trigger == "auto"
    assert summaries_of(conversation) == []

    celery_use_broker(url=broker.url, options=broker.options)  # the broker is back
    worker()  # its start-up sweep publishes the pending job
    done = wait_for(lambda: job_finished(job.pk), what="the summary job")
    assert done.status == SummaryJob.Status.DONE, done.error
    [summary] = summaries_of(conversation)

    second = send(owner, conversation, "And the next step?")
    assert second.status == 200 and second.named("done")
    record = OptimizationRecord.objects.filter(conversation=conversation).order_by("-id").first()
    assert record.summary_id == summary.pk
    sent = fake_openai.requests[-1].messages
    assert any(m["role"] == "system" and m["content"].startswith("[Conversation summary") for m in sent)


def test_confirm_before_compaction_waits_for_the_user_then_a_worker_runs_it(broker, worker, owner, fake_openai):
    from rest_framework.test import APIClient

    UserSettings.objects.update_or_create(user=owner, defaults={"preference": "quality", "confirm_compaction": True})
    config = chat_config(owner, fake_openai.base_url, window=4_000, max_output=500)
    conversation = Conversation.objects.create(owner=owner, llm_config=config)
    seed_messages(conversation, 60, words=40)
    worker()
    api = APIClient()
    api.force_authenticate(owner)
    jobs_url = f"/api/conversations/{conversation.pk}/summary-jobs/"

    # The turn is answered at once; the summary it needs waits for the user's answer.
    first = send(owner, conversation, "What did we decide about the invoices?")
    assert first.status == 200 and first.named("done"), first.events
    asked = SummaryJob.objects.get(conversation=conversation)
    assert asked.status == SummaryJob.Status.AWAITING_CONFIRMATION

    # "Not now": cancelled, and the worker that is running never summarizes it.
    dismissed = api.post(f"{jobs_url}{asked.pk}/dismiss/", format="json")
    assert dismissed.status_code == 200 and dismissed.json()["status"] == "cancelled"
    second = send(owner, conversation, "And the next step?")
    assert second.status == 200 and second.named("done")
    asked.refresh_from_db()
    assert asked.status == SummaryJob.Status.CANCELLED and asked.summary_id is None

    # Later the user compacts after all (here typed as /compact with instructions): the worker writes it.
    compact = api.post(
        f"/api/conversations/{conversation.pk}/compact/", {"content": "/compact keep the invoice numbers"},
        format="json",
    )
    assert compact.status_code == 202
    job_id = compact.json()["id"]
    done = wait_for(lambda: job_finished(job_id), what="the summary job")
    assert done.status == SummaryJob.Status.DONE, done.error
    assert (done.trigger, done.instructions) == ("manual", "keep the invoice numbers")
    [summary] = summaries_of(conversation)
    assert done.summary_id == summary.pk
    latest = api.get(jobs_url).json()["results"][0]
    assert (latest["id"], latest["status"], latest["summary_id"]) == (job_id, "done", summary.pk)
    assert latest["duration_ms"] is not None and latest["duration_ms"] >= 0
    prompts = [m["content"] for r in fake_openai.requests for m in r.messages if m["role"] == "system"]
    assert any("keep the invoice numbers" in p for p in prompts)
