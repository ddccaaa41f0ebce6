"""Chat controls of issue 4 in the API: "Not now" on a compaction question, reading a summary, and
switching the model of an existing conversation."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from chatapp.chat.models import Conversation, Message, SummaryJob, UserSettings
from chatapp.chat.services import conversation_set_config
from chatapp.chat.summary_services import summary_job_request
from chatapp.providers.services import llm_config_create

pytestmark = pytest.mark.django_db


def _awaiting_job(conversation: Conversation) -> SummaryJob:
    """What the request path leaves behind when "confirm before automatic compaction" is on."""
    UserSettings.objects.update_or_create(user=conversation.owner, defaults={"confirm_compaction": True})
    job = summary_job_request(conversation=conversation, trigger=SummaryJob.Trigger.AUTO)
    assert job is not None and job.status == SummaryJob.Status.AWAITING_CONFIRMATION
    return job


def _dismiss_url(conversation: Conversation, job: SummaryJob) -> str:
    return f"/api/conversations/{conversation.pk}/summary-jobs/{job.pk}/dismiss/"


# --- "Not now" -------------------------------------------------------------------------------------


def test_not_now_cancels_the_waiting_job_and_the_job_list_shows_it(api, user, make_conversation):
    conversation = make_conversation(user, messages=6)
    job = _awaiting_job(conversation)

    response = api.post(_dismiss_url(conversation, job), format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["id"] == job.pk
    assert response.json()["status"] == "cancelled"
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.CANCELLED
    assert job.finished_at is not None
    listed = api.get(f"/api/conversations/{conversation.pk}/summary-jobs/").json()
    assert [(j["id"], j["status"]) for j in listed["results"]] == [(job.pk, "cancelled")]
    # A double click is harmless.
    assert api.post(_dismiss_url(conversation, job), format="json").status_code == 200
    # Nothing is active any more, but "Not now" holds until the history grows by a tenth of the
    # budget (tests/chat/test_summary_not_now.py); then a later turn asks again.
    assert summary_job_request(conversation=conversation, trigger=SummaryJob.Trigger.AUTO) is None
    Conversation.objects.filter(pk=conversation.pk).update(live_token_count=10**7)
    again = summary_job_request(conversation=conversation, trigger=SummaryJob.Trigger.AUTO)
    assert again is not None and again.pk != job.pk and again.status == SummaryJob.Status.AWAITING_CONFIRMATION


def test_not_now_is_owner_only(api, other_api, user, other_user, make_conversation):
    conversation = make_conversation(user, messages=4)
    job = _awaiting_job(conversation)
    another_of_mine = make_conversation(user, title="Other chat")
    theirs = make_conversation(other_user, title="Theirs")

    assert other_api.post(_dismiss_url(conversation, job), format="json").status_code == 404
    # A real job under the wrong conversation is not found either, even for its owner.
    assert api.post(_dismiss_url(another_of_mine, job), format="json").status_code == 404
    assert other_api.post(_dismiss_url(theirs, job), format="json").status_code == 404
    assert api.post(f"/api/conversations/{conversation.pk}/summary-jobs/{job.pk + 999}/dismiss/").status_code == 404
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.AWAITING_CONFIRMATION


@pytest.mark.parametrize("status", [SummaryJob.Status.QUEUED, SummaryJob.Status.RUNNING, SummaryJob.Status.DONE])
def test_a_job_that_is_not_waiting_cannot_be_dismissed(api, user, make_conversation, status):
    conversation = make_conversation(user, messages=4)
    job = SummaryJob.objects.create(conversation=conversation, status=status, trigger=SummaryJob.Trigger.MANUAL)

    response = api.post(_dismiss_url(conversation, job), format="json")

    assert response.status_code == 400
    assert "status" in response.json()
    job.refresh_from_db()
    assert job.status == status


def test_compact_now_confirms_the_waiting_job_with_the_composer_instructions(api, user, make_conversation):
    conversation = make_conversation(user, messages=6)
    job = _awaiting_job(conversation)

    response = api.post(
        f"/api/conversations/{conversation.pk}/compact/", {"content": "/compact keep the SQL"}, format="json"
    )

    assert response.status_code == 202, response.json()
    assert response.json()["id"] == job.pk
    job.refresh_from_db()
    assert job.status != SummaryJob.Status.AWAITING_CONFIRMATION
    assert (job.trigger, job.instructions) == (SummaryJob.Trigger.MANUAL, "keep the SQL")
    # Once confirmed it can no longer be dismissed.
    assert api.post(_dismiss_url(conversation, job), format="json").status_code == 400


# --- reading a summary -----------------------------------------------------------------------------


def test_a_summary_is_readable_by_its_owner_only(api, other_api, user, make_conversation):
    conversation = make_conversation(user, messages=4)
    summary = Message.objects.create(
        conversation=conversation, role="system", kind="summary",
        content="[Conversation summary — covers messages 1-4]\n\n**Decisions:** <script>x()</script>use SQL",
        covers_through_id=conversation.messages.order_by("id").last().pk, covered_message_count=4,
    )
    chat_message = conversation.messages.filter(kind="chat").first()

    response = api.get(f"/api/summaries/{summary.pk}/")

    assert response.status_code == 200
    data = response.json()
    assert data["id"] == summary.pk and data["kind"] == "summary" and data["covered_message_count"] == 4
    assert "<strong>Decisions:</strong>" in data["html"]
    assert "<script" not in data["html"]
    assert other_api.get(f"/api/summaries/{summary.pk}/").status_code == 404
    assert api.get(f"/api/summaries/{chat_message.pk}/").status_code == 404


# --- switching the model of a conversation ---------------------------------------------------------


def _small_config(owner, name="Small"):
    return llm_config_create(
        owner=owner, name=name, base_url="https://api.openai.com/v1", model="gpt-4o-mini",
        context_window=8000, max_output_tokens=1000,
    )


def test_switching_the_model_changes_the_gauge_budget(api, user, make_conversation, make_config):
    big = make_config(user, name="Big")  # gpt-4o-mini's registry window, the default
    small = _small_config(user)
    conversation = make_conversation(user, messages=6)
    before = api.get(f"/api/conversations/{conversation.pk}/context/").json()
    assert before["budget"] == big.context_window - big.max_output_tokens

    response = api.patch(f"/api/conversations/{conversation.pk}/", {"llm_config": small.pk}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["llm_config"] == small.pk
    conversation.refresh_from_db()
    assert conversation.llm_config_id == small.pk
    after = api.get(f"/api/conversations/{conversation.pk}/context/").json()
    assert after["budget"] == 8000 - 1000
    assert after["tokens"] == before["tokens"]  # same history, same stored counts

    # null: back to the user's default config (fixed again: a later default does not move the chat).
    back = api.patch(f"/api/conversations/{conversation.pk}/", {"llm_config": None}, format="json")
    assert back.status_code == 200 and back.json()["llm_config"] == big.pk
    assert api.get(f"/api/conversations/{conversation.pk}/context/").json()["budget"] == before["budget"]

    # offline: the built-in demo model, whatever configs exist; and back to a config
    offline = api.patch(f"/api/conversations/{conversation.pk}/", {"offline": True}, format="json")
    assert offline.status_code == 200
    assert (offline.json()["offline"], offline.json()["llm_config"]) == (True, None)
    again = api.patch(f"/api/conversations/{conversation.pk}/", {"llm_config": small.pk}, format="json")
    assert (again.json()["offline"], again.json()["llm_config"]) == (False, small.pk)
    both = api.patch(f"/api/conversations/{conversation.pk}/", {"llm_config": big.pk, "offline": True}, format="json")
    assert both.status_code == 400 and "offline" in both.json()


def test_offline_false_leaves_the_demo_for_the_default_and_keeps_a_chosen_config(api, user):
    default, other = _small_config(user, name="Default"), _small_config(user, name="Other")
    conversation = Conversation.objects.create(owner=user, title="Chat", offline=True)
    path = f"/api/conversations/{conversation.pk}/"

    back = api.patch(path, {"offline": False}, format="json")

    # it answered 200 and the chat stayed on the demo
    assert back.status_code == 200
    assert (back.json()["offline"], back.json()["llm_config"]) == (False, default.pk)
    api.patch(path, {"llm_config": other.pk}, format="json")
    kept = api.patch(path, {"offline": False}, format="json")
    assert (kept.json()["offline"], kept.json()["llm_config"]) == (False, other.pk)


def test_another_users_config_is_a_field_error_and_changes_nothing(
    api, user, other_user, make_conversation, make_config
):
    mine = make_config(user, name="Mine")
    theirs = _small_config(other_user, name="Theirs")
    conversation = Conversation.objects.create(owner=user, title="Chat", llm_config=mine)

    response = api.patch(f"/api/conversations/{conversation.pk}/", {"llm_config": theirs.pk}, format="json")

    assert response.status_code == 400
    assert "llm_config" in response.json()
    assert api.patch(f"/api/conversations/{conversation.pk}/", {"llm_config": 10**9}, format="json").status_code == 400
    assert api.patch(f"/api/conversations/{conversation.pk}/", {"llm_config": "x"}, format="json").status_code == 400
    conversation.refresh_from_db()
    assert conversation.llm_config_id == mine.pk


def test_patch_needs_a_field_and_a_refused_title_leaves_the_model_alone(api, user, make_conversation):
    small = _small_config(user)
    conversation = make_conversation(user)

    assert api.patch(f"/api/conversations/{conversation.pk}/", {}, format="json").status_code == 400
    response = api.patch(
        f"/api/conversations/{conversation.pk}/", {"title": "   ", "llm_config": small.pk}, format="json"
    )
    assert response.status_code == 400
    conversation.refresh_from_db()
    assert conversation.llm_config_id is None and conversation.title == "Chat"

    both = api.patch(f"/api/conversations/{conversation.pk}/", {"title": "Renamed", "llm_config": small.pk},
                     format="json")
    assert both.status_code == 200
    assert (both.json()["title"], both.json()["llm_config"]) == ("Renamed", small.pk)


def test_switching_another_users_conversation_is_404(api, other_user, user, make_conversation):
    small = _small_config(user)
    theirs = make_conversation(other_user)
    response = api.patch(f"/api/conversations/{theirs.pk}/", {"llm_config": small.pk}, format="json")
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.llm_config_id is None


def test_conversation_set_config_service(user, other_user, make_conversation):
    mine = _small_config(user)
    theirs = _small_config(other_user, name="Theirs")
    conversation = make_conversation(user)
    updated_at = conversation.updated_at

    with pytest.raises(ValidationError) as refused:
        conversation_set_config(conversation=conversation, llm_config=theirs)
    assert "llm_config" in refused.value.message_dict
    assert Conversation.objects.get(pk=conversation.pk).llm_config_id is None

    conversation_set_config(conversation=conversation, llm_config=mine)
    stored = Conversation.objects.get(pk=conversation.pk)
    assert stored.llm_config_id == mine.pk
    # A settings change does not move the chat to the top of the sidebar.
    assert stored.updated_at == updated_at


def test_gauge_reports_the_whole_history_beside_the_optimized_next_request(api, user, make_conversation):
    """"Compact now?" quotes the whole history against the budget (what the trigger measures); the
    gauge's own figure is the already-optimized next request."""
    small = _small_config(user)  # budget 8,000 - 1,000 = 7,000; trigger at 5,600
    conversation = make_conversation(user, messages=1000)  # 8 tokens each: 8,000 stored
    Conversation.objects.filter(pk=conversation.pk).update(
        llm_config=small, live_message_count=1000, live_token_count=8000, live_char_count=17_000
    )

    gauge = api.get(f"/api/conversations/{conversation.pk}/context/").json()

    assert gauge["budget"] == 7000
    assert gauge["history_tokens"] >= 8000 > 0.8 * gauge["budget"]
    assert gauge["tokens"] <= 0.5 * gauge["budget"] < gauge["history_tokens"]
    assert gauge["history_ratio"] == round(gauge["history_tokens"] / 7000, 4)
