"""A job that finds its work held elsewhere looks again later; with Redis that wait is spent holding the
message unacknowledged, so it must end within the visibility timeout, or Redis hands the message to a
second worker and the next look runs twice (each then publishing a retry of its own)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.utils import timezone

from chatapp.chat import tasks
from chatapp.chat.import_models import ImportJob
from chatapp.chat.import_services import import_job_create, import_job_run
from chatapp.chat.models import SummaryJob
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import summary_job_request
from tests.chat.importkit import file_bytes


@pytest.fixture
def visibility_60s(settings):
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS, "visibility_timeout": 60}


def _running(model, pk: int, *, for_seconds: int) -> None:
    model.objects.filter(pk=pk).update(status="running", attempts=1,
                                       lease_expires_at=timezone.now() + timedelta(seconds=for_seconds))


def test_a_summary_held_by_another_delivery_looks_again_within_the_visibility_timeout(
    owner, long_conversation, published, visibility_60s
):
    job = summary_job_request(conversation=long_conversation(config=None), trigger="auto")
    _running(SummaryJob, job.pk, for_seconds=300)  # the default lease, five times the timeout
    held = summary_job_run(job_id=job.pk)
    assert held.status == "retry" and 0 < held.retry_in <= 30


def test_a_summary_waiting_for_its_owners_other_one_looks_again_within_the_visibility_timeout(
    owner, long_conversation, published, visibility_60s, settings
):
    settings.SUMMARY_USER_WAIT_SECONDS = 120
    running = summary_job_request(conversation=long_conversation(config=None), trigger="auto")
    _running(SummaryJob, running.pk, for_seconds=300)
    second = summary_job_request(conversation=long_conversation(config=None), trigger="manual")
    waited = summary_job_run(job_id=second.pk)
    assert waited.status == "retry" and 0 < waited.retry_in <= 30


def test_an_import_held_by_another_worker_looks_again_within_the_visibility_timeout(owner, visibility_60s):
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", file_bytes("openwebui_branch.json")))
    _running(ImportJob, job.pk, for_seconds=300)
    outcome = import_job_run(job_id=job.pk)
    assert outcome.status == "busy" and 0 < outcome.retry_in <= 30


def test_an_account_deletion_retried_after_a_database_error_comes_back_within_the_visibility_timeout(
    visibility_60s, settings, monkeypatch
):
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS, "visibility_timeout": 20}
    asked: list[float] = []

    class Retried(Exception):
        pass

    def lock_timeout(*, user_id):
        raise OperationalError("lock wait timeout")

    def retry(*, exc, countdown):
        asked.append(countdown)
        return Retried()

    monkeypatch.setattr(tasks, "account_purge", lock_timeout)
    monkeypatch.setattr(tasks.purge_account, "retry", retry)
    with pytest.raises(Retried):
        tasks.purge_account.run(42)
    assert len(asked) == 1 and 0 < asked[0] <= 10


def test_without_a_visibility_timeout_the_wait_is_the_lease(owner, long_conversation, published, settings):
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"polling_interval": 0.25}  # the filesystem broker's kind
    job = summary_job_request(conversation=long_conversation(config=None), trigger="auto")
    _running(SummaryJob, job.pk, for_seconds=300)
    held = summary_job_run(job_id=job.pk)
    assert held.status == "retry" and 290 < held.retry_in < 302
