"""Branch in new chat through the API: `POST /api/messages/<id>/fork/` answers the new chat (201), or for a
path over MAX_FORK_MESSAGES the import job that writes it (202)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from chatapp.chat import fork_services
from chatapp.chat.import_models import ImportJob
from chatapp.chat.import_services import MAX_UNFINISHED_IMPORTS, import_job_run
from chatapp.chat.tasks import import_conversations
from tests.support.streaming import sse_events

pytestmark = pytest.mark.django_db


def _timeline(api, pk: int) -> list[dict]:
    return api.get(f"/api/conversations/{pk}/messages/").json()["results"]


def test_a_new_chat_from_a_reply_keeps_the_path_and_the_model(api, other_api, echo_config, fake_openai):
    pk = api.post("/api/conversations/", {"llm_config": echo_config["id"]}, format="json").json()["id"]
    for text in ("first question", "second question"):
        events = sse_events(api.post(f"/api/conversations/{pk}/messages/", {"content": text}, format="json")
                            .recorded_body)
        assert events[-1][0] == "done"
    q1, a1, q2, a2 = _timeline(api, pk)

    assert other_api.post(f"/api/messages/{a1['id']}/fork/").status_code == 404
    assert APIClient().post(f"/api/messages/{a1['id']}/fork/").status_code in (401, 403)
    response = api.post(f"/api/messages/{a1['id']}/fork/")
    assert response.status_code == 201
    fork = response.json()
    assert fork["id"] != pk and fork["llm_config"] == echo_config["id"] and fork["title"].endswith(" (branch)")
    assert [(m["role"], m["content"], m["created_at"]) for m in _timeline(api, fork["id"])] == [
        (m["role"], m["content"], m["created_at"]) for m in (q1, a1)
    ]
    assert [m["id"] for m in _timeline(api, pk)] == [q1["id"], a1["id"], q2["id"], a2["id"]]

    # The model answers the new chat from where it was branched.
    events = sse_events(api.post(f"/api/conversations/{fork['id']}/messages/", {"content": "a new direction"},
                                 format="json").recorded_body)
    assert events[-1][0] == "done"
    sent = [m["content"] for m in fake_openai.completions[-1].messages if m["role"] != "system"]
    assert sent == ["first question", a1["content"], "a new direction"]


def test_a_message_the_chat_no_longer_shows_is_refused(api, echo_config):
    pk = api.post("/api/conversations/", {}, format="json").json()["id"]
    sse_events(api.post(f"/api/conversations/{pk}/messages/", {"content": "first"}, format="json").recorded_body)
    q1, _ = _timeline(api, pk)
    sse_events(api.post(f"/api/messages/{q1['id']}/edit/", {"content": "first, edited"}, format="json").recorded_body)
    refused = api.post(f"/api/messages/{q1['id']}/fork/")
    assert refused.status_code == 400 and "switch to it first" in refused.json()["detail"]


def test_a_path_over_the_limit_answers_202_with_the_job_that_writes_it(api, other_api, echo_config, monkeypatch,
                                                                      django_capture_on_commit_callbacks):
    pk = api.post("/api/conversations/", {"llm_config": echo_config["id"]}, format="json").json()["id"]
    for text in ("first question", "second question"):
        sse_events(api.post(f"/api/conversations/{pk}/messages/", {"content": text}, format="json").recorded_body)
    q1, a1, q2, _ = _timeline(api, pk)
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 2)
    monkeypatch.setattr(import_conversations, "apply_async", lambda *, args, **kwargs: import_job_run(job_id=args[0]))

    assert other_api.post(f"/api/messages/{q2['id']}/fork/").status_code == 404
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"/api/messages/{q2['id']}/fork/")
    assert response.status_code == 202, response.content
    job = response.json()
    assert response["Location"] == f"/api/imports/{job['id']}/"
    assert (job["status"], job["kind"], job["messages"]) == ("queued", "branch", 3)
    assert (job["filename"], job["source_conversation"]) == ("first question (branch)", pk)

    done = api.get(f"/api/imports/{job['id']}/").json()
    assert (done["status"], done["imported"], done["error"]) == ("done", 1, "")
    (fork,) = done["conversations"]
    assert [(m["role"], m["content"]) for m in _timeline(api, fork["id"])] == [
        (m["role"], m["content"]) for m in (q1, a1, q2)]
    assert api.get(f"/api/conversations/{fork['id']}/").json()["llm_config"] == echo_config["id"]
    assert other_api.get(f"/api/imports/{job['id']}/").status_code == 404


def test_a_branch_job_past_the_backlog_or_the_size_limit_is_refused_in_words(api, user, echo_config, monkeypatch,
                                                                             settings):
    pk = api.post("/api/conversations/", {"llm_config": echo_config["id"]}, format="json").json()["id"]
    sse_events(api.post(f"/api/conversations/{pk}/messages/", {"content": "a question"}, format="json").recorded_body)
    _, a1 = _timeline(api, pk)
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 1)
    settings.IMPORT_MAX_BYTES = 100
    too_large = api.post(f"/api/messages/{a1['id']}/fork/")
    assert too_large.status_code == 400 and "the largest branch written in the background" in too_large.json()["detail"]

    settings.IMPORT_MAX_BYTES = 10_000_000
    for _ in range(MAX_UNFINISHED_IMPORTS):
        ImportJob.objects.create(owner=user, filename="waiting.json")
    throttled = api.post(f"/api/messages/{a1['id']}/fork/")
    assert throttled.status_code == 429 and "branch from this message again" in throttled.json()["detail"]
    assert ImportJob.objects.count() == MAX_UNFINISHED_IMPORTS
