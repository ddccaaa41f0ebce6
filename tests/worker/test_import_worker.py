"""A conversation import run by a real Celery worker subprocess (filesystem broker, and Redis when
REDIS_URL is set): the upload is published after commit, the worker claims and imports it, and a
worker killed mid-import leaves a job that the redelivery resumes without importing anything twice."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from chatapp.chat.import_models import ImportJob
from chatapp.chat.import_services import import_job_create
from chatapp.chat.models import Conversation
from chatapp.chat.selectors import conversation_list
from tests.chat.importkit import chatgpt_conversation, file_bytes
from tests.support.worker import broker_queue_empty, broker_queue_lose, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _ended(job_id: int) -> ImportJob | None:
    return ImportJob.objects.filter(pk=job_id, status__in=["done", "failed"]).first()


def test_a_worker_imports_an_upload(owner, broker, worker, settings):
    settings.CELERY_IMPORT_QUEUE = broker.queue  # the test worker consumes this queue only
    worker(CELERY_IMPORT_QUEUE=broker.queue)
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", file_bytes("chatgpt_branch.json")))
    ended = wait_for(lambda: _ended(job.pk), timeout=60, what="the import to end")
    assert (ended.status, ended.total, ended.done, ended.attempts) == ("done", 2, 2, 1)
    assert [c.title for c in conversation_list(owner=owner, query="pumpernickel")] == ["Sourdough schedule"]


def test_a_killed_worker_is_taken_over_and_nothing_is_imported_twice(owner, broker, worker, settings):
    settings.CELERY_IMPORT_QUEUE = broker.queue
    env = {"CELERY_IMPORT_QUEUE": broker.queue, "IMPORT_LEASE_SECONDS": "2"}
    first = worker(**env)
    document = [chatgpt_conversation(i, messages=400) for i in range(60)]
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", json.dumps(document).encode()))
    wait_for(lambda: ImportJob.objects.filter(pk=job.pk, done__gte=3).exists(), timeout=60, what="some progress")
    first.kill9()
    stopped_at = ImportJob.objects.get(pk=job.pk)
    assert stopped_at.status == "running" and stopped_at.done < 60
    # The message comes back (acks_late: Redis after its visibility timeout, the filesystem broker
    # when a worker starts again); the new delivery waits the lease out, then resumes.
    worker(**env)
    ended = wait_for(lambda: _ended(job.pk), timeout=120, what="the import to end after the takeover")
    assert (ended.status, ended.done, len(ended.conversation_ids)) == ("done", 60, 60)
    assert ended.attempts >= 2
    titles = list(Conversation.objects.filter(owner=owner).order_by("id").values_list("title", flat=True))
    assert titles == [f"Chat {i}" for i in range(60)]


def test_a_starting_worker_publishes_an_import_whose_message_the_broker_lost(owner, broker, worker, settings):
    settings.CELERY_IMPORT_QUEUE = broker.queue
    settings.IMPORT_LEASE_SECONDS = 1  # how long the queued job waits for a worker before it counts as lost
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", file_bytes("chatgpt_branch.json")))
    wait_for(lambda: not broker_queue_empty(broker), what="the job's message to be published")
    broker_queue_lose(broker)
    wait_for(lambda: ImportJob.objects.filter(pk=job.pk, lease_expires_at__lt=timezone.now()).exists(),
             what="the queued job's lease to run out")

    # The periodic sweep is an hour away: only the worker's start-up can publish the job again.
    worker(CELERY_IMPORT_QUEUE=broker.queue, SUMMARY_SWEEP_INTERVAL_SECONDS="3600")
    ended = wait_for(lambda: _ended(job.pk), timeout=60, what="the import to end")
    assert (ended.status, ended.total, ended.done, ended.attempts) == ("done", 2, 2, 1)
