"""Summary jobs run by a real Celery worker subprocess (filesystem broker, and Redis when REDIS_URL is set).

Fault tests: a worker killed with SIGKILL mid model call, a private redis-server stopped at enqueue time and
started again (and the filesystem broker's folders missing), a model answering 500 then 200, duplicate
deliveries and double clicks.
"""

from __future__ import annotations

import shutil

import pytest
from django.db import connection

from chatapp.chat.models import Conversation, SummaryJob, UserSettings
from chatapp.chat.summary_requests import summary_requests_wait
from chatapp.chat.summary_services import (
    conversation_compact,
    summary_job_enqueue,
    summary_job_request,
    summary_jobs_sweep,
)
from chatapp.providers.models import LLMConfig
from tests.support.chat import make_config as chat_config
from tests.support.chat import seed_messages, send
from tests.support.worker import (
    PRIVATE_REDIS,
    celery_use_broker,
    job_finished,
    job_state,
    summaries_of,
    sweeps_done,
    wait_for,
    worker_settled,
)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _completion_requests(fake_openai) -> list:
    return [r for r in fake_openai.requests if r.method == "POST" and r.path.rstrip("/").endswith("/chat/completions")]


def test_worker_writes_a_rolling_summary_with_instructions(worker, make_config, long_conversation, fake_openai):
    fake_openai.reset()
    conversation = long_conversation(config=make_config("fake-echo"), rounds=12, window_rounds=3)
    w = worker()

    first = conversation_compact(conversation=conversation, instructions="keep all the SQL we wrote")
    job = wait_for(lambda: job_finished(first.pk), what="the first job")
    assert job.status == SummaryJob.Status.DONE, job.error
    [summary] = summaries_of(conversation)
    assert summary.role == "system" and not summary.extractive
    assert summary.content.startswith("[Conversation summary \u2014 covers messages 2\u2013")
    assert summary.model == "fake-echo" and summary.prompt_tokens and summary.completion_tokens
    assert job.summary_id == summary.pk and job.started_at and job.finished_at
    prompt = " ".join(str(m.get("content")) for m in _completion_requests(fake_openai)[-1].messages)
    assert "keep all the SQL we wrote" in prompt and "INV-1001" in prompt

    # More history is evicted: the next (automatic) summary folds the previous one and the new span.
    for i in range(4):
        conversation.messages.create(role="user", content=f"Later question {i} about INV-77{i}")
        conversation.messages.create(role="assistant", content=f"Later answer {i}")
    newest_user = conversation.messages.filter(role="user").order_by("-id").values_list("id", flat=True)[1]
    conversation.window_start_id = newest_user
    conversation.save(update_fields=["window_start_id"])
    second = summary_job_request(conversation=conversation, trigger="auto")
    job = wait_for(lambda: job_finished(second.pk), what="the rolling job")
    assert job.status == SummaryJob.Status.DONE, job.error
    older, newer = summaries_of(conversation)
    assert newer.covers_from_id == older.covers_from_id and newer.covers_through_id > older.covers_through_id
    assert newer.covered_message_count > older.covered_message_count
    rolled_prompt = " ".join(str(m.get("content")) for m in _completion_requests(fake_openai)[-1].messages)
    assert "INV-770" in rolled_prompt
    assert older.content.partition("\n\n")[2][:60] in rolled_prompt  # the previous summary is folded in
    w.stop()


def _auto_job_run(worker, make_config, long_conversation, fake_openai, *, model: str):
    """An automatic summary job of a fresh conversation on `model`, run by a worker to its end."""
    fake_openai.reset()
    conversation = long_conversation(config=make_config(model))
    worker()
    job = summary_job_request(conversation=conversation, trigger="auto")
    return conversation, wait_for(lambda: job_finished(job.pk), what=f"the job on {model}")


def test_500_then_200_gives_one_summary_after_a_retry(worker, make_config, long_conversation, fake_openai):
    conversation, job = _auto_job_run(worker, make_config, long_conversation, fake_openai, model="flaky-500-then-200")
    assert job.status == SummaryJob.Status.DONE, job.error
    assert job.attempts == 2
    [summary] = summaries_of(conversation)
    assert not summary.extractive and summary.model == "flaky-500-then-200"
    assert len(_completion_requests(fake_openai)) == 2


def test_model_failing_every_retry_falls_back_to_extractive(worker, make_config, long_conversation, fake_openai):
    conversation, job = _auto_job_run(worker, make_config, long_conversation, fake_openai, model="fail-500")
    assert job.status == SummaryJob.Status.DONE
    assert job.attempts == 3  # SUMMARY_MAX_RETRIES=2 in the worker: 1 try + 2 retries
    assert "extractive" in job.error
    [summary] = summaries_of(conversation)
    assert summary.extractive and summary.model == "extractive"
    assert len(_completion_requests(fake_openai)) == 3


def test_bad_key_is_not_retried_and_fails_the_job_with_its_reason(worker, make_config, long_conversation, fake_openai):
    conversation, job = _auto_job_run(worker, make_config, long_conversation, fake_openai, model="fail-401")
    assert job.status == SummaryJob.Status.FAILED
    assert job.attempts == 1 and len(_completion_requests(fake_openai)) == 1
    assert "sk-test-worker-key" not in job.error and job.error
    [summary] = summaries_of(conversation)  # the conversation still gets a (extractive) summary
    assert summary.extractive and job.summary_id == summary.pk


def test_duplicate_deliveries_and_double_clicks_give_one_summary(worker, make_config, long_conversation, fake_openai):
    conversation = long_conversation(config=make_config("slow-300"))
    first = conversation_compact(conversation=conversation)
    second = conversation_compact(conversation=conversation)  # double click
    assert second.pk == first.pk
    for _ in range(3):  # the same message delivered again (a sweep, a redelivery)
        assert summary_job_enqueue(job_id=first.pk)
    w = worker()
    job = wait_for(lambda: job_finished(first.pk), what="the job")
    assert job.status == SummaryJob.Status.DONE
    # All four deliveries ran (the duplicates found the job taken or done), and a sweep after them.
    sweeps = sweeps_done(w)
    wait_for(lambda: worker_settled(w, sweeps_before=sweeps), what="every delivery to be answered")
    assert w.log().count(f"summary job {first.pk}: ") == 4
    assert len(summaries_of(conversation)) == 1
    assert job_state(first.pk).attempts == 1
    assert SummaryJob.objects.filter(conversation=conversation).count() == 1


def test_worker_killed_mid_call_job_completes_once(worker, make_config, long_conversation, fake_openai):
    fake_openai.reset()
    config = make_config("slow-20000")
    conversation = long_conversation(config=config)
    w = worker()
    job = summary_job_request(conversation=conversation, trigger="auto")
    wait_for(lambda: job_state(job.pk).status == SummaryJob.Status.RUNNING, what="the job to start")
    wait_for(lambda: _completion_requests(fake_openai), what="the model call")
    w.kill9()
    assert job_state(job.pk).status == SummaryJob.Status.RUNNING  # the dead worker left it running
    LLMConfig.objects.filter(pk=config.pk).update(model="fake-echo")  # the retried call answers at once

    w.start()  # restarted: the redelivered message (Redis) or the sweep (lease expired) runs it again
    done = wait_for(lambda: job_finished(job.pk), timeout=45, what="the job after the restart")
    assert done.status == SummaryJob.Status.DONE, done.error
    assert done.attempts == 2
    # A late duplicate (the redelivered message and the sweep both bring it back) must not write a
    # second summary: wait until every delivery has been answered and a sweep ran after the job.
    sweeps = sweeps_done(w)
    wait_for(lambda: worker_settled(w, sweeps_before=sweeps), what="every delivery to be answered")
    [summary] = summaries_of(conversation)
    assert summary.model == "fake-echo" and done.summary_id == summary.pk


@pytest.mark.parametrize("broker", [PRIVATE_REDIS], indirect=True)
def test_redis_stopped_at_enqueue_chat_answers_and_job_runs_once_redis_is_back(
    broker, worker, owner, fake_openai, settings
):
    settings.SEND_RATE_LIMIT_PER_MINUTE = 1000
    UserSettings.objects.update_or_create(user=owner, defaults={"preference": "quality"})
    config = chat_config(owner, fake_openai.base_url, window=4_000, max_output=500)
    conversation = Conversation.objects.create(owner=owner, llm_config=config)
    seed_messages(conversation, 60, words=40)  # well past the trigger: the optimizer chooses summarize
    w = worker()  # a worker is up when Redis goes away

    broker.private_redis.stop()
    reply = send(owner, conversation, "What did we decide about the invoices?")
    assert reply.status == 200 and reply.named("done"), reply.events
    assert reply.named("start")[0]["context"]["strategy"] == "summarize"
    assert summary_requests_wait(timeout=30)
    job = SummaryJob.objects.get(conversation=conversation)
    assert job.status == SummaryJob.Status.PENDING and job.trigger == "auto"
    assert summaries_of(conversation) == []

    broker.private_redis.start()  # back on the same port, empty (no persistence)
    # The sweep (cron / beat / worker start-up) publishes what the broker missed; the worker reconnects.
    wait_for(
        lambda: job_state(job.pk).status != SummaryJob.Status.PENDING or summary_jobs_sweep()["published"],
        what="the sweep to publish the pending job",
    )
    done = wait_for(lambda: job_finished(job.pk), timeout=90, what="the pending job after Redis is back")
    assert done.status == SummaryJob.Status.DONE, done.error
    # A late duplicate (the beat's sweep) must not write a second summary.
    sweeps = sweeps_done(w)
    wait_for(lambda: worker_settled(w, sweeps_before=sweeps), what="every delivery to be answered")
    assert len(summaries_of(conversation)) == 1


@pytest.mark.parametrize("broker", ["filesystem"], indirect=True)
def test_filesystem_broker_unreachable_at_enqueue_job_runs_once_it_is_back(
    broker, worker, make_config, long_conversation, tmp_path
):
    conversation = long_conversation(config=make_config("fake-echo"))
    # The web side's broker folders are gone (an unmounted volume): publishing fails.
    gone = tmp_path / "unmounted"
    folders = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")
    celery_use_broker(url=broker.url, options={**broker.options, **{k: str(gone / k) for k in folders}})
    job = summary_job_request(conversation=conversation, trigger="auto")
    assert job is not None
    assert job_state(job.pk).status == SummaryJob.Status.PENDING
    assert summary_jobs_sweep()["published"] == 0  # still unreachable: the job stays pending
    assert job_state(job.pk).status == SummaryJob.Status.PENDING
    assert not gone.exists()

    celery_use_broker(url=broker.url, options=broker.options)  # the folders are back
    worker()  # worker start-up sweeps pending jobs
    done = wait_for(lambda: job_finished(job.pk), what="the pending job")
    assert done.status == SummaryJob.Status.DONE, done.error
    assert len(summaries_of(conversation)) == 1


@pytest.mark.parametrize("broker", ["filesystem"], indirect=True)
def test_filesystem_broker_folders_deleted_under_a_running_worker_the_next_job_runs(
    broker, worker, make_config, long_conversation, tmp_path
):
    """The broker's folders deleted while the worker ran (a clean-up of var/): its consumer stopped on
    the missing folder and every enqueue failed until a restart."""
    conversation = long_conversation(config=make_config("fake-echo"))
    worker()
    folders = [tmp_path / "broker" / sub for sub in ("out", "processed", "control")]
    for folder in folders:
        shutil.rmtree(folder)
    wait_for(lambda: folders[0].is_dir(), what="the worker's poll to make the message folder again")
    job = summary_job_request(conversation=conversation, trigger="auto")
    assert job is not None
    done = wait_for(lambda: job_finished(job.pk), what="the job published after the deletion")
    assert done.status == SummaryJob.Status.DONE, done.error
    assert len(summaries_of(conversation)) == 1


def test_worker_uses_the_test_database(worker, owner):
    """Guard for the fixtures: the worker must see this test's rows (same database)."""
    assert connection.settings_dict["NAME"]
    conversation = owner.conversations.create(title="tiny")
    job = SummaryJob.objects.create(conversation=conversation, status=SummaryJob.Status.PENDING)
    worker()
    done = wait_for(lambda: job_finished(job.pk), what="the empty job")
    assert done.status == SummaryJob.Status.CANCELLED and "Nothing" in done.error
