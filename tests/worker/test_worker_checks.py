"""A Celery worker says at start what `manage.py` commands say: the system checks' warnings. Workers are
started without `manage.py check`, and chat.W001 (a summary lease no longer than the summary's model
call) is about the worker above all."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("broker", ["filesystem"], indirect=True)
def test_a_worker_started_with_a_lease_shorter_than_the_summary_call_logs_chat_w001(broker, worker):
    started = worker(SUMMARY_JOB_LEASE_SECONDS="30", SUMMARY_TIMEOUT_SECONDS="60")  # returns once ready
    log = started.log()
    assert "WARNING" in log and "(chat.W001) SUMMARY_JOB_LEASE_SECONDS (30) does not exceed" in log
    assert "Set SUMMARY_JOB_LEASE_SECONDS above SUMMARY_TIMEOUT_SECONDS" in log  # the hint


@pytest.mark.parametrize("broker", ["filesystem"], indirect=True)
def test_a_worker_started_with_a_sound_lease_logs_no_check_warning(broker, worker):
    # The checks run before the worker says it is ready: its log is complete on that point.
    started = worker(SUMMARY_JOB_LEASE_SECONDS="300", SUMMARY_TIMEOUT_SECONDS="60")
    log = started.log()
    assert " ready." in log and "chat.W001" not in log
