"""Edit and branches through the API (issue 13): `POST /api/messages/<id>/edit/` streams a new sibling's
reply, `POST /api/messages/<id>/branch/` switches the active path, and the timeline answers the active
path with each message's sibling index and count."""

from __future__ import annotations

import pytest

from chatapp.chat.models import Message, OptimizationRecord, SummaryJob
from chatapp.chat.services import user_settings_update
from tests.support.chat import make_config
from tests.support.streaming import sse_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(api, echo_config) -> int:
    """A conversation of two exchanges (q1, a1, q2, a2), sent through the API."""
    pk = api.post("/api/conversations/", {}, format="json").json()["id"]
    for text in ("first question", "second question"):
        response = api.post(f"/api/conversations/{pk}/messages/", {"content": text}, format="json")
        assert sse_events(response.recorded_body)[-1][0] == "done"
    return pk


def _timeline(api, pk: int) -> list[dict]:
    response = api.get(f"/api/conversations/{pk}/messages/")
    assert response.status_code == 200
    return response.json()["results"]


def test_edit_streams_a_new_branch_and_the_timeline_follows_it(api, chat, fake_openai):
    q1, a1, q2, a2 = _timeline(api, chat)
    assert [(m["sibling_index"], m["sibling_count"]) for m in (q1, a1, q2, a2)] == [(1, 1)] * 4
    assert (q2["parent"], a2["parent"]) == (a1["id"], q2["id"])

    response = api.post(f"/api/messages/{q2['id']}/edit/", {"content": "second question, edited"}, format="json")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/event-stream")
    events = sse_events(response.recorded_body)
    assert [name for name, _ in events][:2] == ["accepted", "start"] and events[-1][0] == "done"
    start = events[0][1]
    assert start["user_message"]["content"] == "second question, edited"
    assert (start["user_message"]["sibling_index"], start["user_message"]["sibling_count"]) == (2, 2)
    # The model saw the new path only.
    sent = [m["content"] for m in fake_openai.completions[-1].messages]
    assert any("edited" in c for c in sent) and not any(c == "second question" for c in sent)

    timeline = _timeline(api, chat)
    assert [m["id"] for m in timeline[:2]] == [q1["id"], a1["id"]]
    assert timeline[2]["content"] == "second question, edited" and timeline[2]["parent"] == a1["id"]
    assert (timeline[2]["sibling_index"], timeline[2]["sibling_count"]) == (2, 2)
    assert len(timeline) == 4 and q2["id"] not in {m["id"] for m in timeline}

    # Back to the first version: the old path, whole.
    switched = api.post(f"/api/messages/{timeline[2]['id']}/branch/", {"index": 1}, format="json")
    assert switched.status_code == 200
    assert switched.json()["id"] == q2["id"] and switched.json()["sibling_index"] == 1
    assert [m["id"] for m in _timeline(api, chat)] == [q1["id"], a1["id"], q2["id"], a2["id"]]


def test_regenerate_makes_reply_siblings(api, chat):
    *_, a2 = _timeline(api, chat)
    response = api.post(f"/api/messages/{a2['id']}/regenerate/")
    done = sse_events(response.recorded_body)[-1]
    assert done[0] == "done"
    assert (done[1]["message"]["sibling_index"], done[1]["message"]["sibling_count"]) == (2, 2)
    last = _timeline(api, chat)[-1]
    assert last["id"] == done[1]["message"]["id"] and last["parent"] == a2["parent"]


def test_edit_and_branch_bad_input(api, chat):
    _q1, a1, q2, _ = _timeline(api, chat)
    url = f"/api/messages/{q2['id']}/edit/"
    assert api.post(url, {"content": "  "}, format="json").status_code == 400
    assert api.post(url, {}, format="json").status_code == 400
    assert api.post(url, data='{"content": "x"', content_type="application/json").status_code == 400
    refused = api.post(f"/api/messages/{a1['id']}/edit/", {"content": "not mine"}, format="json")
    assert refused.status_code == 400 and "Only your own messages" in refused.json()["detail"]

    branch = f"/api/messages/{q2['id']}/branch/"
    assert api.post(branch, {"index": 2}, format="json").status_code == 400  # only one version
    assert api.post(branch, {"index": "two"}, format="json").status_code == 400
    assert api.post(branch, {}, format="json").status_code == 400
    assert api.post(branch, {"index": 1}, format="json").status_code == 200  # already shown: a no-op
    assert len(_timeline(api, chat)) == 4


def test_no_switch_while_a_reply_streams(api, chat):
    q1, *_ = _timeline(api, chat)
    Message.objects.create(conversation_id=chat, role="assistant", content="", status="streaming")
    conflict = api.post(f"/api/messages/{q1['id']}/branch/", {"index": 1}, format="json")
    assert conflict.status_code == 409
    # Said of the switch asked for (the page shows these words), not of a send and its kept text.
    assert conflict.json()["detail"] == ("A reply is still being written in this chat (in another tab or device?). "
                                         "Wait for it or stop it, then switch versions.")
    assert api.post(f"/api/messages/{q1['id']}/edit/", {"content": "new"}, format="json").status_code == 409


def test_a_summary_job_says_whether_its_summary_is_on_the_path_shown(api, chat):
    """A summary whose messages an edit took off the path (meanwhile, or after) is sent on that version
    only: its job says so, and the page then does not say the model uses it from the next message."""
    q1, a1, q2, a2 = _timeline(api, chat)

    def summary_job(through: dict) -> Message:
        summary = Message.objects.create(conversation_id=chat, role="system", kind="summary",
                                         content="[Conversation summary] so far", covers_from_id=q1["id"],
                                         covers_through_id=through["id"], covered_message_count=2)
        SummaryJob.objects.create(conversation_id=chat, status=SummaryJob.Status.DONE, summary=summary)
        return summary

    kept, left = summary_job(a1), summary_job(a2)
    SummaryJob.objects.create(conversation_id=chat, status=SummaryJob.Status.FAILED)
    edited = api.post(f"/api/messages/{q2['id']}/edit/", {"content": "second question, edited"}, format="json")
    assert sse_events(edited.recorded_body)[-1][0] == "done"

    jobs = api.get(f"/api/conversations/{chat}/summary-jobs/").json()["results"]
    assert [(j["summary_id"], j["summary_on_active_path"]) for j in jobs] == [
        (None, None), (left.pk, False), (kept.pk, True)]


def test_other_users_messages_are_404(other_api, chat):
    q1, *_ = Message.objects.filter(conversation_id=chat).order_by("id")
    assert other_api.post(f"/api/messages/{q1.pk}/edit/", {"content": "mine?"}, format="json").status_code == 404
    assert other_api.post(f"/api/messages/{q1.pk}/branch/", {"index": 1}, format="json").status_code == 404
    assert Message.objects.filter(conversation_id=chat).count() == 4


def test_schema_documents_the_sibling_fields(api):
    schema = api.get("/api/schema/", {"format": "json"}).json()
    message = schema["components"]["schemas"]["MessageOutput"]["properties"]
    assert {"parent", "sibling_index", "sibling_count"} <= set(message)
    assert message["sibling_index"]["type"] == "integer"
    edit = schema["paths"]["/api/messages/{id}/edit/"]["post"]
    assert "content" in str(edit["requestBody"])


def test_the_same_edit_sent_twice_is_stored_once_and_answered_as_a_repeat(api, chat):
    q2 = _timeline(api, chat)[2]
    body = {"content": "second question, edited", "client_key": "edit-k1"}
    once = api.post(f"/api/messages/{q2['id']}/edit/", body, format="json")
    assert sse_events(once.recorded_body)[-1][0] == "done"

    # The client lost the first answer and sends the edit again: a repeat, as for a send (409), not a
    # request to switch branches (400), and nothing more is stored.
    again = api.post(f"/api/messages/{q2['id']}/edit/", body, format="json")
    assert again.status_code == 409
    assert again.json()["detail"] == "This message was already sent (the same send arrived twice)."
    assert Message.objects.filter(conversation_id=chat, client_key="edit-k1").count() == 1
    assert Message.objects.filter(conversation_id=chat).count() == 6


def test_an_edit_of_a_pinned_message_keeps_the_pin_so_it_is_sent_once_out_of_the_window(api, user, fake_openai):
    """Pin a message, then fix it with Edit: the new version is the message now (as the edit keeps its
    images), so it is pinned too. It was not: the pin stayed on the version the edit took off the path,
    which nothing sends, and the new text was cut with the rest once the window moved past it."""
    # Cut by truncation alone (no summary job to run): the pin is what keeps the message sent.
    user_settings_update(user=user, auto_optimize=False, generate_titles=False)
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=2_500, max_output=500)
    pk = api.post("/api/conversations/", {"llm_config": config.pk}, format="json").json()["id"]

    def send(text: str) -> list[tuple[str, dict]]:
        events = sse_events(api.post(f"/api/conversations/{pk}/messages/", {"content": text}, format="json")
                            .recorded_body)
        assert events[-1][0] == "done", events
        return events

    send("Hello there.")
    spec = send("The spec: PostgreSQL 16 on port 5433.")[0][1]["user_message"]["id"]
    assert api.post(f"/api/messages/{spec}/pin/", {"pinned": True}, format="json").status_code == 200

    edit = api.post(f"/api/messages/{spec}/edit/", {"content": "The spec: PostgreSQL 17 on port 5434."}, format="json")
    events = sse_events(edit.recorded_body)
    assert events[-1][0] == "done", events
    edited = events[0][1]["user_message"]
    assert (edited["pinned"], edited["place"]) == (True, "static")
    for turn in range(12):  # unrelated turns, until the window has moved well past the edited message
        send(f"Turn {turn}: " + " ".join(f"tent{turn}x{j}" for j in range(120)))

    record = OptimizationRecord.objects.filter(conversation_id=pk).latest("id")
    assert record.window_start_id > edited["id"]  # the message lies below the window
    assert [e["origin"] for e in record.sent if e["source_ids"] == [edited["id"]]] == ["pinned"]
    assert any("PostgreSQL 17" in str(m["content"]) for m in fake_openai.completions[-1].messages)
