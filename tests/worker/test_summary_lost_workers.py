"""A summary job whose worker process dies mid-run (in-process: the delivery stops with a BaseException,
as a killed process leaves its claim behind): the next delivery takes it over once the lease ends, and a
job that kills its worker every time is given up after a bounded number of claims, not run for ever."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chatapp.chat import summary_runner
from chatapp.chat.models import SummaryJob
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import summary_job_request
from tests.support.worker import summaries_of

pytestmark = pytest.mark.django_db(transaction=True)


class WorkerKilled(BaseException):
    """What a delivery cut short by its process's death looks like to the job: it stops holding it."""


def _lease_runs_out(job: SummaryJob) -> None:
    SummaryJob.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_the_delivery_after_a_worker_died_writes_the_summary_once(long_conversation, published, monkeypatch):
    job = summary_job_request(conversation=long_conversation(config=None), trigger="auto")
    real_plan = summary_runner.span_plan
    deaths: list[int] = []

    def plan_dying_once(**kwargs):
        if not deaths:
            deaths.append(1)
            raise WorkerKilled
        return real_plan(**kwargs)

    monkeypatch.setattr(summary_runner, "span_plan", plan_dying_once)
    with pytest.raises(WorkerKilled):
        summary_job_run(job_id=job.pk)
    assert summary_job_run(job_id=job.pk).status == "retry"  # its lease still runs: held, looked at later
    _lease_runs_out(job)

    assert summary_job_run(job_id=job.pk).status == "done"
    assert summary_job_run(job_id=job.pk).status == "skipped"
    assert len(summaries_of(job.conversation)) == 1


def test_a_job_that_kills_its_worker_every_time_is_given_up(long_conversation, published, monkeypatch, settings):
    job = summary_job_request(conversation=long_conversation(config=None), trigger="auto")
    claims: list[int] = []

    def plan_always_dying(**kwargs):
        claims.append(1)
        raise WorkerKilled

    monkeypatch.setattr(summary_runner, "span_plan", plan_always_dying)
    outcome = None
    for _ in range(30):  # far more deliveries than any bound: each lease ends, the message comes back
        try:
            outcome = summary_job_run(job_id=job.pk)
        except WorkerKilled:
            _lease_runs_out(job)
            continue
        break

    assert outcome is not None and outcome.status == "skipped"
    assert 1 < len(claims) <= settings.SUMMARY_MAX_RETRIES + 3  # re-run, but within the job's attempts
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.FAILED and job.error.startswith("Gave up after")
    assert summary_job_run(job_id=job.pk).status == "skipped"
    assert summaries_of(job.conversation) == []
