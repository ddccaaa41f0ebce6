"""Branch in new chat through the API: `POST /api/messages/<id>/fork/` answers the new chat (201)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

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
