"""Celery settings that would make the broker run a task twice, or publish where no worker reads,
stop start-up naming the variables."""

from __future__ import annotations

import pytest

from tests.support.settings_start import SETTINGS_LOAD, settings_start

_REDIS = "redis://broker.internal:6379/0"
_VISIBILITY = SETTINGS_LOAD + (
    "; from django.conf import settings as s; print(s.CELERY_BROKER_TRANSPORT_OPTIONS.get('visibility_timeout'))"
)


@pytest.mark.parametrize("env", [
    # the default backoff cap (60 s) beyond a shortened timeout
    {"CELERY_VISIBILITY_TIMEOUT": "30"},
    # a longer backoff cap than the default timeout (an hour)
    {"SUMMARY_RETRY_BACKOFF_MAX_MS": "7200000"},
    {"CELERY_VISIBILITY_TIMEOUT": "60", "SUMMARY_RETRY_BACKOFF_MAX_MS": "60000"},
])
def test_a_visibility_timeout_within_the_retry_backoff_stops_start_up(tmp_path, env):
    """A retry waits in its worker, unacknowledged, for its countdown: Redis delivered it again to
    another worker once the visibility timeout passed, and the job ran twice."""
    started = settings_start(tmp_path, REDIS_URL=_REDIS, **env)
    assert started.returncode != 0
    assert "ImproperlyConfigured" in started.stderr
    assert "CELERY_VISIBILITY_TIMEOUT" in started.stderr and "SUMMARY_RETRY_BACKOFF_MAX_MS" in started.stderr


@pytest.mark.parametrize(("env", "shown"), [
    ({"REDIS_URL": _REDIS}, "3600"),
    ({"REDIS_URL": _REDIS, "CELERY_VISIBILITY_TIMEOUT": "61"}, "61"),
    # the tests' own short timeout, with a backoff shorter still
    ({"REDIS_URL": _REDIS, "CELERY_VISIBILITY_TIMEOUT": "3", "SUMMARY_RETRY_BACKOFF_MAX_MS": "1000"}, "3"),
    # the filesystem broker has no visibility timeout: nothing to compare
    ({"CELERY_VISIBILITY_TIMEOUT": "30"}, "None"),
])
def test_a_visibility_timeout_beyond_the_backoff_is_taken(tmp_path, env, shown):
    started = settings_start(tmp_path, _VISIBILITY, **env)
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.strip().splitlines()[-1] == shown


@pytest.mark.parametrize(("name", "value"), [
    # published to the queue "summaries,celery", while the worker (-Q takes a comma-separated list)
    # read "summaries" and "celery": every summary stayed queued
    ("CELERY_SUMMARY_QUEUE", "summaries,celery"),
    ("CELERY_IMPORT_QUEUE", "imports,"),
    # the filesystem broker names each message's file after its queue: every enqueue failed
    ("CELERY_IMPORT_QUEUE", "imports/big"),
])
def test_a_queue_name_no_worker_could_read_stops_start_up(tmp_path, name, value):
    started = settings_start(tmp_path, **{name: value})
    assert started.returncode != 0
    assert "ImproperlyConfigured" in started.stderr and f"{name} must be one queue name" in started.stderr
    assert repr(value) in started.stderr


_QUEUES = SETTINGS_LOAD + (
    "; from django.conf import settings as s; print(s.CELERY_SUMMARY_QUEUE, s.CELERY_IMPORT_QUEUE)"
)


def test_queue_names_of_letters_digits_dots_dashes_and_colons_are_taken(tmp_path):
    started = settings_start(tmp_path, _QUEUES, CELERY_SUMMARY_QUEUE="chat.summaries-1",
                             CELERY_IMPORT_QUEUE="jobs:import_2")
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.strip().splitlines()[-1] == "chat.summaries-1 jobs:import_2"
