"""Export → import → export through the API gives the same document, but for the ids this server gives,
the moment of the download and what the file does not carry (see the end): the README calls our JSON
import "an exact round trip" (pins, summaries and the pins they passed over, dates, images, the folder
by name, the chat's pin and archive, its system prompt, the message tree)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chatapp.chat.import_services import import_job_run
from chatapp.chat.models import Conversation, Message
from tests.dashboard.factories import make_summary
from tests.support.images import b64, png_bytes
from tests.support.streaming import sse_events

pytestmark = pytest.mark.django_db

# Fields holding a message id of this server: compared by the place of the message they name.
_MESSAGE_IDS = ("id", "reply_to_id", "covers_from_id", "covers_through_id", "edited_from_id", "parent_id",
                "off_path_by")


def _send(api, chat: int, content: str, **extra: Any) -> None:
    response = api.post(f"/api/conversations/{chat}/messages/", {"content": content, **extra}, format="json")
    assert sse_events(response.recorded_body)[-1][0] == "done"


def _export(api, chat: int) -> dict[str, Any]:
    response = api.get(f"/api/conversations/{chat}/export/", {"format": "json"})
    assert response.status_code == 200
    return json.loads(response.recorded_body)


def _without_ids(document: dict[str, Any]) -> dict[str, Any]:
    place = {message["id"]: k for k, message in enumerate(document["messages"])}
    messages = []
    for message in document["messages"]:
        renamed = {key: place.get(value, value) if key in _MESSAGE_IDS else value for key, value in message.items()}
        skipped = message["skipped_pin_ids"]
        renamed["skipped_pin_ids"] = [place[pk] for pk in skipped] if skipped else skipped
        messages.append(renamed)
    head = {**document["conversation"], "id": None}
    head["window_start_id"] = place.get(head["window_start_id"], head["window_start_id"])
    return {**document, "exported_at": None, "conversation": head, "messages": messages}


def test_an_exported_chat_imports_back_as_it_was(api, user, echo_config):
    folder = api.post("/api/folders/", {"name": "Travel"}, format="json").json()
    chat = api.post("/api/conversations/", {"title": "Lisbon", "system_prompt": "Answer briefly."},
                    format="json").json()["id"]
    _send(api, chat, "Plan a trip", images=[{"data": b64(png_bytes(32, 24)), "name": "map.png"}])
    _send(api, chat, "With trams")
    first, _, second, _ = api.get(f"/api/conversations/{chat}/messages/").json()["results"]
    edited = api.post(f"/api/messages/{second['id']}/edit/", {"content": "With ferries"}, format="json")
    assert sse_events(edited.recorded_body)[-1][0] == "done"  # the trams' question and answer: a branch
    rows = list(Message.objects.filter(conversation_id=chat, superseded=False).order_by("id"))
    make_summary(conversation=Conversation.objects.get(pk=chat), covers=(rows[0], rows[1]), covered=2,
                 content="[Conversation summary — covers messages 1-2]\n\nA trip.", skipped_pin_ids=[rows[0].pk])
    assert api.post(f"/api/messages/{first['id']}/pin/", {"pinned": True}, format="json").status_code == 200
    assert api.patch(f"/api/conversations/{chat}/", {"pinned": True, "archived": True, "folder": folder["id"]},
                     format="json").status_code == 200
    before = _export(api, chat)

    upload = SimpleUploadedFile("Lisbon.json", json.dumps(before).encode(), content_type="application/json")
    job = api.post("/api/imports/", {"file": upload}, format="multipart").json()
    import_job_run(job_id=job["id"])
    done = api.get(f"/api/imports/{job['id']}/").json()
    assert done["status"] == "done", done["error"]
    copy = Conversation.objects.exclude(pk=chat).get(owner=user)
    after = _export(api, copy.pk)

    assert before["messages"][0]["images"] and before["messages"][0]["pinned"]
    assert before["conversation"]["folder"] == "Travel" and before["conversation"]["archived_at"]
    assert [m["off_path_by"] is not None for m in before["messages"]].count(True) == 2
    assert before["messages"][-1]["skipped_pin_ids"] == [before["messages"][0]["id"]]
    # `preference` is the latest turn's optimization record's, and records are not in the file (the
    # copy's first turn records its own); the summary's token count was made up above, and is counted.
    for document in (before, after):
        document["conversation"]["preference"] = None
        document["messages"][-1]["token_count"] = None
    assert _without_ids(after) == _without_ids(before)


def _import(api, document: dict[str, Any], name: str) -> Conversation:
    upload = SimpleUploadedFile(name, json.dumps(document).encode(), content_type="application/json")
    job = api.post("/api/imports/", {"file": upload}, format="multipart").json()
    import_job_run(job_id=job["id"])
    done = api.get(f"/api/imports/{job['id']}/").json()
    assert done["status"] == "done", done["error"]
    return Conversation.objects.get(pk=done["conversations"][0]["id"])


def test_an_imported_chats_preference_is_a_new_chats_null_until_its_first_turn(api, user, echo_config):
    """A chat has no preference of its own: every turn packs with the owner's setting, and the export's
    `preference` says which one its latest turn used (its optimization record's). Null is "no turn here
    yet": a chat made in the app says so too, and an import, whose file holds no records, is such a chat.
    The file's value is not applied: the copy's turns use the importing owner's setting."""
    assert api.patch("/api/settings/", {"preference": "quality"}, format="json").status_code == 200
    chat = api.post("/api/conversations/", {"title": "Fresh"}, format="json").json()["id"]
    assert _export(api, chat)["conversation"]["preference"] is None
    _send(api, chat, "Hello")
    exported = _export(api, chat)
    assert exported["conversation"]["preference"] == "quality"

    assert api.patch("/api/settings/", {"preference": "fast"}, format="json").status_code == 200
    copy = _import(api, exported, "Fresh.json")
    assert _export(api, copy.pk)["conversation"]["preference"] is None
    _send(api, copy.pk, "Hello again")
    assert _export(api, copy.pk)["conversation"]["preference"] == "fast"
    # The API shows a chat no preference either way: the same fields as a chat made here.
    assert set(api.get(f"/api/conversations/{copy.pk}/").json()) == set(api.get(f"/api/conversations/{chat}/").json())
