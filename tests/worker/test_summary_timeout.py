"""A summary's model call ends at SUMMARY_TIMEOUT_SECONDS, and so within its job's lease, also when the
endpoint keeps the connection alive with whitespace before its JSON: past the lease the sweep hands the
job to a second worker while the first still waits, and both worker slots end up on one slow endpoint."""

from __future__ import annotations

import time

import pytest

from chatapp.chat.models import SummaryJob
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import summary_job_request

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_summary_call_kept_alive_past_its_timeout_is_retried_before_its_lease_ends(
    make_config, long_conversation, published, settings
):
    settings.SUMMARY_TIMEOUT_SECONDS = 1
    settings.SUMMARY_JOB_LEASE_SECONDS = 3
    # The model's answer comes after 6 s of a space every 0.1 s.
    job = summary_job_request(conversation=long_conversation(config=make_config("drip-6000")), trigger="auto")
    started = time.monotonic()

    outcome = summary_job_run(job_id=job.pk)

    assert time.monotonic() - started < settings.SUMMARY_JOB_LEASE_SECONDS
    assert outcome.status == "retry" and "did not answer within 1 second" in outcome.detail
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.QUEUED and job.attempts == 1
