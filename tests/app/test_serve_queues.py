"""`manage.py serve`'s worker consumes every queue the app publishes to."""

from __future__ import annotations

from chatapp.chat.management.commands.serve import worker_queues


def test_the_worker_consumes_the_summary_and_import_queues(settings):
    assert worker_queues() == "summaries,celery"  # imports go to Celery's default queue unless configured
    settings.CELERY_IMPORT_QUEUE = "imports"  # imports sat queued for ever: the worker read summaries,celery
    settings.CELERY_SUMMARY_QUEUE = "sums"
    assert worker_queues() == "sums,imports,celery"
