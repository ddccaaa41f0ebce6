"""Conversations, messages (timeline pages), pins, context gauge, optimization records."""

from __future__ import annotations

import pytest

from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from tests.support.chat import chat_deleted_around

pytestmark = pytest.mark.django_db


def test_conversation_create_list_detail_rename_delete(api, user):
    created = api.post("/api/conversations/", {"title": "First"}, format="json")
    assert created.status_code == 201
    pk = created.json()["id"]
    assert created.json()["title"] == "First"

    second = api.post("/api/conversations/", {}, format="json")
    assert second.status_code == 201

    listing = api.get("/api/conversations/")
    assert listing.status_code == 200
    data = listing.json()
    assert data["count"] == 2
    assert {c["id"] for c in data["results"]} == {pk, second.json()["id"]}

    detail = api.get(f"/api/conversations/{pk}/")
    assert detail.status_code == 200 and detail.json()["title"] == "First"

    renamed = api.patch(f"/api/conversations/{pk}/", {"title": "Renamed"}, format="json")
    assert renamed.status_code == 200
    assert renamed.json()["title"] == "Renamed"
    assert Conversation.objects.get(pk=pk).title == "Renamed"

    assert api.delete(f"/api/conversations/{pk}/").status_code == 204
    assert not Conversation.objects.filter(pk=pk).exists()
    assert api.get(f"/api/conversations/{pk}/").status_code == 404


def test_conversation_list_only_own_and_search(api, user, other_user, make_conversation):
    make_conversation(user, title="Holiday plans")
    mine = make_conversation(user, title="Work", messages=2)
    # Stored as the app stores messages (message_append indexes it; a raw create is not searchable).
    message_append(conversation=mine, role="user", content="the quarterly zebra report")
    make_conversation(other_user, title="Holiday secrets")

    titles = {c["title"] for c in api.get("/api/conversations/").json()["results"]}
    assert titles == {"Holiday plans", "Work"}

    by_title = api.get("/api/conversations/", {"q": "holiday"}).json()["results"]
    assert [c["title"] for c in by_title] == ["Holiday plans"]

    by_content = api.get("/api/conversations/", {"q": "zebra"}).json()["results"]
    assert [c["id"] for c in by_content] == [mine.pk]


def test_conversation_list_paginated(api, user, make_conversation):
    for i in range(7):
        make_conversation(user, title=f"c{i}")
    page = api.get("/api/conversations/", {"limit": 3}).json()
    assert page["count"] == 7
    assert len(page["results"]) == 3
    assert page["next"] is not None
    rest = api.get("/api/conversations/", {"limit": 10, "offset": 3}).json()
    assert len(rest["results"]) == 4
    ids = [c["id"] for c in page["results"]] + [c["id"] for c in rest["results"]]
    assert len(set(ids)) == 7


@pytest.mark.parametrize("path", [
    "/api/conversations/", "/api/conversations/{id}/records/", "/api/conversations/{id}/summary-jobs/",
    "/api/dashboard/conversations/{id}/records/",
])
@pytest.mark.parametrize(("query", "field"), [
    ({"limit": "abc"}, "limit"), ({"limit": 0}, "limit"), ({"limit": -3}, "limit"),
    ({"offset": -1}, "offset"), ({"offset": "xyz"}, "offset"),
])
def test_every_list_refuses_a_bad_limit_or_offset(api, user, make_conversation, path, query, field):
    # DRF's pages answered their defaults instead: a client asking for limit=abc got 50 and no word of it.
    url = path.format(id=make_conversation(user).pk)
    answer = api.get(url, query)
    assert answer.status_code == 400 and field in answer.json() and answer.json()["detail"].startswith(field)
    assert api.get(url, {"limit": 2, "offset": 10**30}).json()["results"] == []  # past the end: empty, not a 500


@pytest.mark.parametrize("change", [{"title": "Renamed"}, {"pinned": True}, {"system_prompt": "Be brief."},
                                    {"offline": True}], ids=["rename", "pin", "system-prompt", "model"])
def test_a_change_to_a_chat_deleted_meanwhile_answers_404_not_500(api, user, make_conversation, monkeypatch, change):
    # Renamed (pinned, …) in one tab as it is deleted in another: found, then deleted, then saved. The
    # save of a row no longer there raised ("did not affect any rows"): a 500 and an error box.
    from chatapp.chat.api import views

    conversation = make_conversation(user)
    chat_deleted_around(monkeypatch, views, "conversation_get", conversation_id=conversation.pk)
    response = api.patch(f"/api/conversations/{conversation.pk}/", change, format="json")
    assert response.status_code == 404, response.content
    monkeypatch.undo()
    # The same answer as for a chat that never was.
    assert response.json() == api.patch(f"/api/conversations/{conversation.pk}/", change, format="json").json()
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


def test_conversation_rename_validation(api, user, make_conversation):
    conversation = make_conversation(user)
    response = api.patch(f"/api/conversations/{conversation.pk}/", {"title": ""}, format="json")
    assert response.status_code == 400
    assert "title" in response.json()
    response = api.patch(f"/api/conversations/{conversation.pk}/", {"title": "x" * 201}, format="json")
    assert response.status_code == 400
    assert "title" in response.json()


@pytest.mark.parametrize("title", ["\u200b", "\ufeff \u2060", "\u200d\u200c"])
def test_a_title_of_only_invisible_characters_is_no_title(api, user, make_conversation, title):
    # A zero-width space pasted alone: a chat with a blank row in the sidebar, a blank header and tab.
    conversation = make_conversation(user, title="Kept")
    renamed = api.patch(f"/api/conversations/{conversation.pk}/", {"title": title}, format="json")
    assert renamed.status_code == 400 and "title" in renamed.json()
    conversation.refresh_from_db()
    assert conversation.title == "Kept"
    created = api.post("/api/conversations/", {"title": title}, format="json")
    assert created.status_code == 400 and "title" in created.json()
    # A title that shows something keeps its invisible characters (a joiner inside an emoji, say).
    kept = api.patch(f"/api/conversations/{conversation.pk}/", {"title": f"Plan{title}B"}, format="json")
    assert kept.status_code == 200 and kept.json()["title"] == f"Plan{title}B"


def test_conversation_create_with_someone_elses_config_is_a_field_error(api, other_user, make_config):
    theirs = make_config(other_user)
    response = api.post("/api/conversations/", {"title": "t", "llm_config": theirs.pk}, format="json")
    assert response.status_code == 400
    assert "llm_config" in response.json()


def test_conversation_create_with_own_config(api, user, make_config):
    mine = make_config(user)
    response = api.post("/api/conversations/", {"title": "t", "llm_config": mine.pk}, format="json")
    assert response.status_code == 201
    assert response.json()["llm_config"] == mine.pk


def test_a_chat_is_created_with_its_system_prompt_or_not_at_all(api, user):
    made = api.post("/api/conversations/", {"title": "Brief", "system_prompt": "  Be brief.\r\n"}, format="json")
    assert made.status_code == 201 and made.json()["system_prompt"] == "Be brief."
    assert Conversation.objects.get(pk=made.json()["id"]).system_prompt == "Be brief."

    too_long = api.post("/api/conversations/", {"title": "Long", "system_prompt": "x" * 20_001}, format="json")
    assert too_long.status_code == 400 and "at most 20,000 characters" in too_long.json()["system_prompt"][0]
    assert not Conversation.objects.filter(title="Long").exists()


def test_malformed_json_is_a_clear_400(api, user, make_conversation):
    conversation = make_conversation(user)
    for method, url in [
        ("post", "/api/conversations/"),
        ("patch", f"/api/conversations/{conversation.pk}/"),
        ("patch", "/api/settings/"),
        ("post", "/api/configs/"),
    ]:
        response = getattr(api, method)(url, data='{"title": ', content_type="application/json")
        assert response.status_code == 400, url
        assert response.json()["detail"] == "The request body is not valid JSON."


# --- Messages timeline ------------------------------------------------------------------------------


def _ids(page: dict) -> list[int]:
    return [m["id"] for m in page["results"]]


def test_messages_newest_page_first_each_page_oldest_to_newest(api, user, make_conversation):
    conversation = make_conversation(user, messages=120)
    all_ids = list(conversation.messages.order_by("id").values_list("id", flat=True))

    first = api.get(f"/api/conversations/{conversation.pk}/messages/")
    assert first.status_code == 200
    first = first.json()
    assert _ids(first) == all_ids[-50:]
    assert first["has_more"] is True
    assert first["next_before"] == all_ids[-50]
    assert f"before={all_ids[-50]}" in first["next"]
    assert first["results"][-1]["content"] == "message number 119"

    second = api.get(f"/api/conversations/{conversation.pk}/messages/", {"before": first["next_before"]}).json()
    assert _ids(second) == all_ids[-100:-50]
    assert second["has_more"] is True

    third = api.get(f"/api/conversations/{conversation.pk}/messages/", {"before": second["next_before"]}).json()
    assert _ids(third) == all_ids[:20]
    assert third["has_more"] is False
    assert third["next"] is None and third["next_before"] is None


def test_messages_limit_and_bad_params(api, user, make_conversation):
    conversation = make_conversation(user, messages=5)
    url = f"/api/conversations/{conversation.pk}/messages/"
    page = api.get(url, {"limit": 2}).json()
    assert len(page["results"]) == 2 and page["has_more"] is True
    assert api.get(url, {"before": "abc"}).status_code == 400
    assert api.get(url, {"limit": "0"}).status_code == 400
    everything = api.get(url, {"limit": 100}).json()
    assert len(everything["results"]) == 5 and everything["has_more"] is False


def test_messages_are_rendered_sanitized(api, user, make_conversation):
    conversation = make_conversation(user)
    Message.objects.create(conversation=conversation, role="user", content="**hi** <script>alert(1)</script>")
    result = api.get(f"/api/conversations/{conversation.pk}/messages/").json()["results"][0]
    assert "<strong>hi</strong>" in result["html"]
    assert "<script" not in result["html"]


def test_pin_and_unpin(api, user, make_conversation):
    conversation = make_conversation(user, messages=2)
    message = conversation.messages.first()
    response = api.post(f"/api/messages/{message.pk}/pin/", {"pinned": True}, format="json")
    assert response.status_code == 200
    assert response.json()["pinned"] is True
    message.refresh_from_db()
    assert message.pinned is True

    response = api.post(f"/api/messages/{message.pk}/pin/", {"pinned": False}, format="json")
    assert response.status_code == 200 and response.json()["pinned"] is False

    missing = api.post(f"/api/messages/{message.pk}/pin/", {}, format="json")
    assert missing.status_code == 400
    assert "pinned" in missing.json()


# --- Context gauge and records ------------------------------------------------------------------


def test_context_gauge(api, user, make_conversation):
    conversation = make_conversation(user, messages=4)
    response = api.get(f"/api/conversations/{conversation.pk}/context/")
    assert response.status_code == 200
    gauge = response.json()
    assert set(gauge) >= {"tokens", "budget", "ratio", "window_start_id", "strategy", "estimated"}
    assert gauge["tokens"] > 0
    assert gauge["budget"] > gauge["tokens"]


def _record(conversation, **overrides) -> OptimizationRecord:
    fields = {
        "conversation": conversation,
        "preference": "balanced",
        "model": "gpt-4o-mini",
        "context_window": 16384,
        "budget": 15360,
        "strategy": "none",
        "tokens_full": 100,
        "tokens_sent": 100,
    }
    fields.update(overrides)
    return OptimizationRecord.objects.create(**fields)


def test_records_paginated_in_turn_order(api, user, make_conversation):
    conversation = make_conversation(user)
    records = [_record(conversation, tokens_full=100 + i) for i in range(5)]
    _record(make_conversation(user, title="other"))

    page = api.get(f"/api/conversations/{conversation.pk}/records/", {"limit": 3}).json()
    assert page["count"] == 5
    assert [r["id"] for r in page["results"]] == [r.pk for r in records[:3]]
    assert page["results"][0]["tokens_full"] == 100
    rest = api.get(page["next"]).json()
    assert [r["id"] for r in rest["results"]] == [r.pk for r in records[3:]]


# --- Another user's objects ---------------------------------------------------------------------


def test_other_users_conversation_objects_answer_404(api, other_user, make_conversation):
    theirs = make_conversation(other_user, messages=2)
    _record(theirs)
    message = theirs.messages.first()
    base = f"/api/conversations/{theirs.pk}"
    assert api.get(f"{base}/").status_code == 404
    assert api.patch(f"{base}/", {"title": "mine now"}, format="json").status_code == 404
    assert api.delete(f"{base}/").status_code == 404
    assert api.get(f"{base}/messages/").status_code == 404
    assert api.get(f"{base}/context/").status_code == 404
    assert api.get(f"{base}/records/").status_code == 404
    assert api.post(f"/api/messages/{message.pk}/pin/", {"pinned": True}, format="json").status_code == 404

    theirs.refresh_from_db()
    message.refresh_from_db()
    assert theirs.title == "Chat" and message.pinned is False
    # And the same answer as for an id that does not exist at all.
    assert api.get("/api/conversations/999999/").status_code == 404
    assert api.post("/api/messages/999999/pin/", {"pinned": True}, format="json").status_code == 404
