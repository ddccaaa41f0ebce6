""""Not now" holds (issue 13, item 5): after the user dismisses "compact now?", the chat asks again
only once the history has grown by another tenth of the budget past the level it was dismissed at."""

from __future__ import annotations

import pytest
from django.db.models import F
from django.utils import timezone
from rest_framework.test import APIClient

from chatapp.chat.context import context_budget, conversation_config
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, SummaryJob, UserSettings
from chatapp.chat.services import summary_job_dismiss
from chatapp.chat.summary_cooldown import NOT_NOW_GROWTH_RATIO, not_now_level
from chatapp.chat.summary_services import conversation_compact, summary_job_request, summary_jobs_sweep
from chatapp.providers.llm import llm_target_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def asking(user):
    UserSettings.objects.update_or_create(user=user, defaults={"confirm_compaction": True})
    return Conversation.objects.create(owner=user, title="Long", offline=True, live_token_count=50_000)


def _budget(conversation: Conversation) -> int:
    return context_budget(target=llm_target_for(config=conversation_config(conversation=conversation)))


def _grow(conversation: Conversation, tokens: int) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(live_token_count=F("live_token_count") + tokens)


def test_not_now_keeps_quiet_until_the_history_grows_by_a_tenth_of_the_budget(asking, published):
    asked = summary_job_request(conversation=asking, trigger="auto")
    assert asked.status == SummaryJob.Status.AWAITING_CONFIRMATION

    dismissed = summary_job_dismiss(job=asked)

    assert dismissed.status == SummaryJob.Status.CANCELLED
    assert not_now_level(reason=dismissed.error) == 50_000
    assert "Not now" in dismissed.error
    # The next turns, automatic or ahead of need, do not ask again...
    assert summary_job_request(conversation=asking, trigger="auto") is None
    assert summary_job_request(conversation=asking, trigger="ahead") is None
    step = int(NOT_NOW_GROWTH_RATIO * _budget(asking))
    _grow(asking, step - 1)
    assert summary_job_request(conversation=asking, trigger="auto") is None
    # ...until the history reaches the dismissed level plus a tenth of the budget.
    _grow(asking, 1)
    again = summary_job_request(conversation=asking, trigger="auto")
    assert again is not None and again.status == SummaryJob.Status.AWAITING_CONFIRMATION
    assert published == []
    # A second "Not now" starts from the new level.
    assert not_now_level(reason=summary_job_dismiss(job=again).error) == 50_000 + step
    assert summary_job_request(conversation=asking, trigger="auto") is None


def test_compact_now_and_slash_compact_are_never_silenced(asking, published):
    for i in range(4):  # older rounds than the two a compaction keeps: something to summarize
        message_append(conversation=asking, role="user", content=f"Question {i}?")
        message_append(conversation=asking, role="assistant", content=f"Answer {i}.")
    summary_job_dismiss(job=summary_job_request(conversation=asking, trigger="auto"))
    manual = conversation_compact(conversation=asking, instructions="keep the SQL")
    assert manual.trigger == "manual" and manual.status == SummaryJob.Status.PENDING
    # A summary made since the dismissal ends the cooldown.
    SummaryJob.objects.filter(pk=manual.pk).update(status=SummaryJob.Status.DONE, finished_at=timezone.now())
    assert summary_job_request(conversation=asking, trigger="auto").status == SummaryJob.Status.AWAITING_CONFIRMATION


def test_an_unanswered_question_that_expired_is_not_a_dismissal(asking, published, settings):
    asked = summary_job_request(conversation=asking, trigger="auto")
    SummaryJob.objects.filter(pk=asked.pk).update(created_at=timezone.now().replace(year=2000))
    summary_jobs_sweep()
    asked.refresh_from_db()
    assert asked.status == SummaryJob.Status.CANCELLED and not_now_level(reason=asked.error) is None
    assert summary_job_request(conversation=asking, trigger="auto") is not None


def test_without_confirmation_the_summary_is_started_whatever_was_dismissed(asking, published):
    summary_job_dismiss(job=summary_job_request(conversation=asking, trigger="auto"))
    UserSettings.objects.filter(user=asking.owner).update(confirm_compaction=False)
    job = summary_job_request(conversation=asking, trigger="auto")
    assert job is not None and job.status == SummaryJob.Status.PENDING


def test_the_dismiss_api_keeps_the_level(asking):
    asked = summary_job_request(conversation=asking, trigger="auto")
    client = APIClient()
    client.force_authenticate(asking.owner)
    response = client.post(
        f"/api/conversations/{asking.pk}/summary-jobs/{asked.pk}/dismiss/", format="json"
    )
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert summary_job_request(conversation=asking, trigger="auto") is None



def _settings_patch(owner, changes: dict) -> None:
    client = APIClient()
    client.force_authenticate(owner)
    assert client.patch("/api/settings/", changes, format="json").status_code == 200


@pytest.mark.parametrize(("switch", "named"), [("confirm_compaction", "Ask before compacting"),
                                               ("auto_optimize", "Automatic optimization")])
def test_turning_the_question_off_withdraws_the_ones_waiting(asking, published, switch, named):
    """A question asked before Ask before compacting (or automatic optimization) was turned off in
    Settings went on asking for a day, and held its chat's one active job: no summary was started there
    meanwhile. Every one of the user's is withdrawn, saying why, and is not a "Not now"."""
    other = Conversation.objects.create(owner=asking.owner, title="Other", offline=True, live_token_count=50_000)
    asked = [summary_job_request(conversation=c, trigger="auto") for c in (asking, other)]

    _settings_patch(asking.owner, {switch: False})

    for job in asked:
        job.refresh_from_db()
        assert job.status == SummaryJob.Status.CANCELLED and not_now_level(reason=job.error) is None
        assert job.error == f"Not asked any more: {named} was turned off."


def test_once_the_question_is_off_the_next_turn_starts_the_summary(asking, published):
    summary_job_request(conversation=asking, trigger="auto")

    _settings_patch(asking.owner, {"confirm_compaction": False})

    job = summary_job_request(conversation=asking, trigger="auto")
    assert job is not None and job.status == SummaryJob.Status.PENDING


def test_settings_saved_with_the_question_still_on_leave_it_waiting(asking, published):
    asked = summary_job_request(conversation=asking, trigger="auto")

    _settings_patch(asking.owner, {"confirm_compaction": True, "auto_optimize": True, "preference": "fast"})

    asked.refresh_from_db()
    assert asked.status == SummaryJob.Status.AWAITING_CONFIRMATION
