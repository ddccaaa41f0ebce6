"""Chat folders over the API: `GET|POST /api/folders/`, `PATCH|DELETE /api/folders/<id>/`, and a chat's
folder through `PATCH /api/conversations/<id>/ {folder}` (`folder` on every conversation). Another
user's folder or chat is a 404; named as the folder a chat of yours is moved into, a 400 naming `folder`."""

from __future__ import annotations

import pytest

from chatapp.chat.folder_models import Folder
from chatapp.chat.models import Conversation

pytestmark = pytest.mark.django_db


def test_folders_are_made_listed_renamed_and_deleted(api):
    made = api.post("/api/folders/", {"name": "Work"}, format="json")
    assert made.status_code == 201
    body = made.json()
    assert body["name"] == "Work" and set(body) == {"id", "name", "created_at"}
    api.post("/api/folders/", {"name": "archive"}, format="json")

    assert [f["name"] for f in api.get("/api/folders/").json()] == ["archive", "Work"]  # by name, any case

    clash = api.post("/api/folders/", {"name": "WORK"}, format="json")
    assert clash.status_code == 400 and "name" in clash.json() and clash.json()["detail"]
    assert api.post("/api/folders/", {"name": "x" * 81}, format="json").status_code == 400
    assert api.post("/api/folders/", {}, format="json").status_code == 400

    renamed = api.patch(f"/api/folders/{body['id']}/", {"name": "Job"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "Job"
    assert api.patch(f"/api/folders/{body['id']}/", {}, format="json").status_code == 400

    assert api.delete(f"/api/folders/{body['id']}/").status_code == 204
    assert api.delete(f"/api/folders/{body['id']}/").status_code == 404
    assert [f["name"] for f in api.get("/api/folders/").json()] == ["archive"]


def test_folders_are_listed_by_name_whatever_their_first_letters_accent(api):
    for name in ["Zeitung", "Été", "apple", "Ärger", "Bücher", "école", "Eagle"]:
        assert api.post("/api/folders/", {"name": name}, format="json").status_code == 201

    # By name as a reader looks one up: "Été" among the E's, not after "Zeitung" where its code point is.
    names = [f["name"] for f in api.get("/api/folders/").json()]
    assert names == ["apple", "Ärger", "Bücher", "Eagle", "école", "Été", "Zeitung"]


def test_a_chat_moves_into_a_folder_and_out_and_says_where_it_is(api, user):
    folder = api.post("/api/folders/", {"name": "Work"}, format="json").json()
    chat = api.post("/api/conversations/", {"title": "Plan"}, format="json").json()
    assert chat["folder"] is None

    moved = api.patch(f"/api/conversations/{chat['id']}/", {"folder": folder["id"]}, format="json")
    assert moved.status_code == 200 and moved.json()["folder"] == folder["id"]
    assert api.get(f"/api/conversations/{chat['id']}/").json()["folder"] == folder["id"]
    listed = api.get("/api/conversations/").json()["results"]
    assert [c["folder"] for c in listed] == [folder["id"]]

    out = api.patch(f"/api/conversations/{chat['id']}/", {"folder": None}, format="json")
    assert out.status_code == 200 and out.json()["folder"] is None

    api.patch(f"/api/conversations/{chat['id']}/", {"folder": folder["id"]}, format="json")
    assert api.delete(f"/api/folders/{folder['id']}/").status_code == 204
    kept = api.get(f"/api/conversations/{chat['id']}/")
    assert kept.status_code == 200 and kept.json()["folder"] is None  # the chat stays, in no folder


def test_another_users_folder_or_chat_is_a_404(api, other_api, user, other_user):
    mine = api.post("/api/folders/", {"name": "Mine"}, format="json").json()
    my_chat = api.post("/api/conversations/", {"title": "Mine"}, format="json").json()
    theirs = other_api.post("/api/folders/", {"name": "Theirs"}, format="json").json()
    their_chat = other_api.post("/api/conversations/", {"title": "Theirs"}, format="json").json()

    assert other_api.patch(f"/api/folders/{mine['id']}/", {"name": "eve"}, format="json").status_code == 404
    assert other_api.delete(f"/api/folders/{mine['id']}/").status_code == 404
    assert [f["name"] for f in other_api.get("/api/folders/").json()] == ["Theirs"]
    # My chat into their folder, their chat into my folder: neither exists for me (an id in the body is
    # a bad value of its field, tests/api/test_api_body_ids.py).
    into_theirs = api.patch(f"/api/conversations/{my_chat['id']}/", {"folder": theirs["id"]}, format="json")
    assert into_theirs.status_code == 400 and into_theirs.json()["folder"] == ["No such folder."]
    assert (
        api.patch(f"/api/conversations/{their_chat['id']}/", {"folder": mine["id"]}, format="json").status_code == 404
    )
    assert api.patch(f"/api/conversations/{my_chat['id']}/", {"folder": 987654321}, format="json").status_code == 400
    assert Conversation.objects.get(pk=my_chat["id"]).folder_id is None
    assert Conversation.objects.get(pk=their_chat["id"]).folder_id is None
    assert Folder.objects.get(pk=mine["id"]).name == "Mine"


def test_a_refused_folder_changes_nothing_else_in_the_same_patch(api):
    chat = api.post("/api/conversations/", {"title": "Plan"}, format="json").json()
    theirs = 987654321
    refused = api.patch(f"/api/conversations/{chat['id']}/", {"title": "New", "folder": theirs}, format="json")
    assert refused.status_code == 400
    assert Conversation.objects.get(pk=chat["id"]).title == "Plan"
