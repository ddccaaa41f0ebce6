"""The streaming endpoints as wired in the API's URL map: send, regenerate, retry, stop.

The turn logic is tested with chat_turn / chat_retry; here: the routes, auth, ownership, the SSE framing, and
that the key never appears in a streamed body either.
"""

from __future__ import annotations

import pytest

from chatapp.chat.models import Message, OptimizationRecord
from tests.support.chat import chat_deleted_around
from tests.support.streaming import sse_events

pytestmark = pytest.mark.django_db


def _send(api, conversation_id: int, content: str):
    return api.post(f"/api/conversations/{conversation_id}/messages/", {"content": content}, format="json")


def test_send_streams_and_is_then_listed(api, user, echo_config):
    conversation = api.post("/api/conversations/", {}, format="json").json()
    response = _send(api, conversation["id"], "Hello there")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    events = sse_events(response.recorded_body)
    names = [name for name, _ in events]
    assert names[:2] == ["accepted", "start"] and names[-1] == "done"
    assert "delta" in names
    done = events[-1][1]
    assert done["message"]["status"] == "complete"

    timeline = api.get(f"/api/conversations/{conversation['id']}/messages/").json()["results"]
    assert [(m["role"], m["status"]) for m in timeline] == [("user", "complete"), ("assistant", "complete")]
    assert timeline[0]["content"] == "Hello there"
    assert timeline[1]["content"] == done["message"]["content"]

    records = api.get(f"/api/conversations/{conversation['id']}/records/").json()
    assert records["count"] == 1
    assert records["results"][0]["reply"] == timeline[1]["id"]


def test_accepted_names_the_model_that_answers_also_after_the_chats_was_deleted(api, user, echo_config, fake_openai):
    # The page's model menu follows it: a chat whose model was deleted in another tab is answered by the
    # default, and the menu went on naming the deleted one until a reload.
    other = api.post("/api/configs/", {"name": "other", "base_url": fake_openai.base_url, "model": "fake-echo"},
                     format="json").json()
    conversation = api.post("/api/conversations/", {"llm_config": other["id"]}, format="json").json()
    accepted = dict(sse_events(_send(api, conversation["id"], "First").recorded_body))["accepted"]
    assert accepted["model"] == str(other["id"])

    assert api.delete(f"/api/configs/{other['id']}/").status_code == 204
    accepted = dict(sse_events(_send(api, conversation["id"], "Second").recorded_body))["accepted"]
    assert accepted["model"] == str(echo_config["id"])  # the default

    offline = api.post("/api/conversations/", {"offline": True}, format="json").json()
    assert dict(sse_events(_send(api, offline["id"], "Hi").recorded_body))["accepted"]["model"] == "offline"


def test_send_bad_input(api, user, echo_config):
    conversation = api.post("/api/conversations/", {}, format="json").json()
    url = f"/api/conversations/{conversation['id']}/messages/"
    assert api.post(url, {"content": "   "}, format="json").status_code == 400
    malformed = api.post(url, data='{"content": "hi"', content_type="application/json")
    assert malformed.status_code == 400
    assert malformed.json()["detail"] == "The request body is not valid JSON."
    assert not Message.objects.filter(conversation_id=conversation["id"]).exists()


def test_regenerate_and_retry(api, user, echo_config, fake_openai):
    conversation = api.post("/api/conversations/", {}, format="json").json()
    _send(api, conversation["id"], "first question")
    reply = Message.objects.get(conversation_id=conversation["id"], role="assistant")

    regenerated = api.post(f"/api/messages/{reply.pk}/regenerate/")
    assert regenerated.status_code == 200
    assert sse_events(regenerated.recorded_body)[-1][0] == "done"
    reply.refresh_from_db()
    assert reply.superseded is True

    # A reply that failed, then Retry once the config is fixed.
    api.patch(f"/api/configs/{echo_config['id']}/", {"model": "fail-500"}, format="json")
    failed = _send(api, conversation["id"], "second question")
    assert sse_events(failed.recorded_body)[-1][0] == "error"
    question = Message.objects.get(conversation_id=conversation["id"], content="second question")
    api.patch(f"/api/configs/{echo_config['id']}/", {"model": "fake-echo"}, format="json")
    retried = api.post(f"/api/messages/{question.pk}/retry/")
    assert retried.status_code == 200
    assert sse_events(retried.recorded_body)[-1][0] == "done"


def test_regenerate_or_retry_of_a_reply_still_being_written_is_a_409(api, user, make_conversation):
    # As the schema says of a reply still being written there (and as a send answers meanwhile): a
    # client told 400 takes its request for a bad one and never tries again once the reply has ended.
    conversation = make_conversation(user)
    question = Message.objects.create(conversation=conversation, role="user", content="q")
    reply = Message.objects.create(conversation=conversation, role="assistant", content="partial",
                                   status="streaming", reply_to=question, parent=question)

    regenerated = api.post(f"/api/messages/{reply.pk}/regenerate/")
    retried = api.post(f"/api/messages/{question.pk}/retry/")

    assert (regenerated.status_code, retried.status_code) == (409, 409)
    assert "stop it first" in regenerated.json()["detail"] and "stop it first" in retried.json()["detail"]
    stored = Message.objects.filter(conversation=conversation).values_list("id", "superseded")
    assert list(stored) == [(question.pk, False), (reply.pk, False)]


def test_stop_marks_a_streaming_reply_stopped(api, user, make_conversation):
    conversation = make_conversation(user)
    reply = Message.objects.create(conversation=conversation, role="assistant", content="partial", status="streaming")
    response = api.post(f"/api/messages/{reply.pk}/stop/")
    assert response.status_code == 200
    assert response.json() == {"id": reply.pk, "status": "stopped"}


@pytest.mark.parametrize("deleted", ["before-the-stop", "after-the-stop"])
def test_stop_in_a_chat_deleted_meanwhile_answers_404_not_500(api, user, make_conversation, monkeypatch, deleted):
    # Another tab deletes the chat while this Stop is between its statements: found, then stopped,
    # then read back. A 500 there showed the user an error box for a stop of a chat that is gone.
    from chatapp.chat.api import stream_views

    conversation = make_conversation(user)
    reply = Message.objects.create(conversation=conversation, role="assistant", content="partial", status="streaming")
    chat_deleted_around(monkeypatch, stream_views, "message_stop", conversation_id=conversation.pk,
                        before=deleted == "before-the-stop")
    response = api.post(f"/api/messages/{reply.pk}/stop/")
    assert response.status_code == 404, response.content
    # The same answer as a stop of a reply that never was (the page says the chat is gone).
    assert response.json() == api.post(f"/api/messages/{reply.pk}/stop/").json()
    assert not Message.objects.filter(pk=reply.pk).exists()


def test_streamed_error_never_carries_the_key(api, user, fake_openai, plain_key):
    config = api.post(
        "/api/configs/",
        {"name": "leaky", "base_url": fake_openai.base_url, "model": "fail-401", "api_key": plain_key},
        format="json",
    ).json()
    conversation = api.post("/api/conversations/", {"llm_config": config["id"]}, format="json").json()
    response = _send(api, conversation["id"], "hello")
    events = sse_events(response.recorded_body)
    assert events[-1][0] == "error"
    # The fake endpoint echoes the received key in its 401 message, so this checks the app's filtering.
    assert fake_openai.completions[-1].api_key == plain_key
    assert plain_key not in response.recorded_body.decode()
    assert OptimizationRecord.objects.filter(conversation_id=conversation["id"]).exists()


def test_other_users_objects_answer_404_on_streaming_and_summary_endpoints(api, other_user, make_conversation):
    theirs = make_conversation(other_user, messages=2)
    user_message, reply = theirs.messages.order_by("id")
    summary = Message.objects.create(conversation=theirs, role="system", kind="summary", content="Summary")

    assert _send(api, theirs.pk, "hi").status_code == 404
    assert _send(api, 2**70, "hi").status_code == 404  # beyond the id column's range: none, as the ORM says
    assert api.post(f"/api/messages/{reply.pk}/regenerate/").status_code == 404
    assert api.post(f"/api/messages/{user_message.pk}/retry/").status_code == 404
    assert api.post(f"/api/messages/{reply.pk}/stop/").status_code == 404
    assert api.post(f"/api/conversations/{theirs.pk}/compact/", {}, format="json").status_code == 404
    assert api.get(f"/api/conversations/{theirs.pk}/summary-jobs/").status_code == 404
    assert api.patch(f"/api/summaries/{summary.pk}/", {"content": "mine"}, format="json").status_code == 404
    assert api.delete(f"/api/summaries/{summary.pk}/").status_code == 404
    assert api.get(f"/api/dashboard/conversations/{theirs.pk}/").status_code == 404

    assert theirs.messages.count() == 3
    summary.refresh_from_db()
    assert summary.content == "Summary" and summary.discarded is False
