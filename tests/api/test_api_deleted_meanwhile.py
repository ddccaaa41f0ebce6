"""Requests on a chat that another tab deletes while they run: each answers as for a chat that never was
(404, which the page reads as "the chat is gone"), never a 500 nor a 200 for a change that was lost."""

from __future__ import annotations

import pytest

from chatapp.chat.models import Conversation, Message, SummaryJob
from tests.support.chat import chat_deleted_around

pytestmark = pytest.mark.django_db


def _summary(conversation: Conversation) -> Message:
    first, last = conversation.messages.order_by("id")[:1].get(), conversation.messages.order_by("-id")[:1].get()
    return Message.objects.create(
        conversation=conversation, role="system", kind="summary", content="[Conversation summary]\n\nWe chose SQL.",
        covers_from_id=first.pk, covers_through_id=last.pk, covered_message_count=4,
    )


@pytest.mark.parametrize("deleted", ["before-the-compaction", "after-the-compaction"])
def test_compact_in_a_chat_deleted_meanwhile_answers_404(api, user, make_conversation, monkeypatch, deleted):
    # "Compact now" (or /compact) as the chat is deleted in another tab: found, then compacted, then its
    # job read back. Deleted before, it was refused "Nothing to summarize yet" (a 400 the composer
    # showed); deleted after, the job read back was gone with the chat: a 500 and an error box.
    from chatapp.chat.api import summary_views

    conversation = make_conversation(user, messages=40)
    url = f"/api/conversations/{conversation.pk}/compact/"
    if deleted == "before-the-compaction":
        chat_deleted_around(monkeypatch, summary_views, "conversation_get", conversation_id=conversation.pk)
    else:
        chat_deleted_around(monkeypatch, summary_views, "conversation_compact", conversation_id=conversation.pk)
    response = api.post(url, {"content": "/compact keep SQL"}, format="json")
    assert response.status_code == 404, response.content
    monkeypatch.undo()
    # The same answer as for a chat that never was.
    assert response.json() == api.post(url, {"content": "/compact keep SQL"}, format="json").json()
    assert not SummaryJob.objects.exists()


@pytest.mark.parametrize("method", ["patch", "delete"], ids=["edit", "discard"])
def test_a_summary_edited_or_discarded_in_a_chat_deleted_meanwhile_answers_404(
    api, user, make_conversation, monkeypatch, method
):
    # The summary's Edit or Discard as the chat is deleted in another tab: a discard read back a summary
    # gone with it (a 500), an edit answered "Only the summary in use can be edited" (a 400) for a chat
    # that is gone.
    from chatapp.chat.api import summary_views

    conversation = make_conversation(user, messages=6)
    summary = _summary(conversation)
    url = f"/api/summaries/{summary.pk}/"
    chat_deleted_around(monkeypatch, summary_views, "summary_get", conversation_id=conversation.pk)
    response = getattr(api, method)(url, {"content": "We chose PostgreSQL."}, format="json")
    assert response.status_code == 404, response.content
    monkeypatch.undo()
    assert response.json() == getattr(api, method)(url, {"content": "We chose PostgreSQL."}, format="json").json()
    assert not Message.objects.exists()


def test_a_message_pinned_in_a_chat_deleted_meanwhile_answers_404(api, user, make_conversation, monkeypatch):
    # Pinned as the chat is deleted in another tab: the pin changed no row, yet answered 200 "pinned",
    # and the page showed the message pinned in a chat that is gone.
    from chatapp.chat.api import views

    conversation = make_conversation(user, messages=2)
    message = conversation.messages.first()
    url = f"/api/messages/{message.pk}/pin/"
    chat_deleted_around(monkeypatch, views, "message_get", conversation_id=conversation.pk)
    response = api.post(url, {"pinned": True}, format="json")
    assert response.status_code == 404, response.content
    monkeypatch.undo()
    assert response.json() == api.post(url, {"pinned": True}, format="json").json()


def test_not_now_in_a_chat_deleted_meanwhile_answers_404(api, user, make_conversation, monkeypatch):
    # "Not now" on the compaction question as the chat is deleted in another tab: the job read back was
    # gone with the chat, a 500.
    from chatapp.chat.api import summary_views

    conversation = make_conversation(user, messages=6)
    job = SummaryJob.objects.create(conversation=conversation, status=SummaryJob.Status.AWAITING_CONFIRMATION)
    url = f"/api/conversations/{conversation.pk}/summary-jobs/{job.pk}/dismiss/"
    chat_deleted_around(monkeypatch, summary_views, "summary_job_dismiss", conversation_id=conversation.pk, before=True)
    response = api.post(url)
    assert response.status_code == 404, response.content
    monkeypatch.undo()
    assert response.json() == api.post(url).json()


@pytest.mark.django_db(transaction=True)  # committed as the server commits: the link's row is checked then
def test_a_share_of_a_chat_deleted_meanwhile_answers_404(api, user, make_conversation, monkeypatch):
    # Share pressed as the chat is deleted in another tab: the link's row pointed at a chat no longer
    # there, and its commit failed (a 500 and an error box).
    from chatapp.chat.api import share_views
    from chatapp.chat.models import ConversationShare

    conversation = make_conversation(user, messages=2)
    url = f"/api/conversations/{conversation.pk}/share/"
    chat_deleted_around(monkeypatch, share_views, "conversation_get", conversation_id=conversation.pk)
    response = api.post(url)
    assert response.status_code == 404, response.content
    monkeypatch.undo()
    assert response.json() == api.post(url).json()
    assert not ConversationShare.objects.exists()


def test_a_branch_switch_in_a_chat_deleted_meanwhile_answers_404(api, user, echo_config, monkeypatch):
    # "< 1/2" pressed as the chat is deleted in another tab: the switch done, the message it shows was
    # read back gone with the chat, a 500 and an error box.
    from chatapp.chat import branch_services
    from tests.support.streaming import sse_events

    pk = api.post("/api/conversations/", {}, format="json").json()["id"]
    sent = api.post(f"/api/conversations/{pk}/messages/", {"content": "a question"}, format="json")
    first = sse_events(sent.recorded_body)[-1][1]["message"]["id"]
    again = sse_events(api.post(f"/api/messages/{first}/regenerate/").recorded_body)[-1]
    assert again[0] == "done"
    url = f"/api/messages/{again[1]['message']['id']}/branch/"
    chat_deleted_around(monkeypatch, branch_services, "branch_show", conversation_id=pk)
    response = api.post(url, {"index": 1}, format="json")
    assert response.status_code == 404, response.content
    monkeypatch.undo()
    assert response.json() == api.post(url, {"index": 1}, format="json").json()
