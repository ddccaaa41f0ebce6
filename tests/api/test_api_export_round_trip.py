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
from tests.api.test_api_export import chat as every_kind_chat  # a fixture: every kind of message
from tests.dashboard.factories import make_summary
from tests.support.images import b64, png_bytes
from tests.support.streaming import sse_events

__all__ = ["every_kind_chat"]

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
    made = make_summary(conversation=Conversation.objects.get(pk=chat), covers=(rows[0], rows[1]), covered=2,
                        content="[Conversation summary — covers messages 1-2]\n\nA trip.", skipped_pin_ids=[rows[0].pk])
    # Edited: a new version in use, the first kept discarded (edited_from, discarded: ids of this server too).
    edit = api.patch(f"/api/summaries/{made.pk}/", {"content": "A trip to Lisbon."}, format="json")
    assert edit.status_code == 200, edit.content
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
    assert before["messages"][-2]["skipped_pin_ids"] == [before["messages"][0]["id"]]
    assert before["messages"][-2]["discarded"] and before["messages"][-1]["edited_from_id"] == made.pk
    # `preference` is the latest turn's optimization record's, and records are not in the file (the
    # copy's first turn records its own); the summary's token count was made up above, and is counted.
    for document in (before, after):
        document["conversation"]["preference"] = None
        document["messages"][-2]["token_count"] = None
    assert _without_ids(after) == _without_ids(before)
    _assert_the_copy_reads_as_the_chat(api, chat, copy.pk)


def _assert_the_copy_reads_as_the_chat(api, chat: int, copy: int) -> None:
    """What the file does not carry but the import derives — the running totals the turn packs with, the
    gauge, each message's place in the tree and in the window, the images — reads the same in the copy."""
    def read(pk: int) -> dict[str, Any]:
        head = api.get(f"/api/conversations/{pk}/").json()
        # The model was asked for no title in either (a custom one); an import marks it asked, so it never is.
        head = {k: v for k, v in head.items() if k not in ("id", "title_pending")}
        timeline = api.get(f"/api/conversations/{pk}/messages/").json()["results"]
        place = {m["id"]: k for k, m in enumerate(timeline)}
        messages = [_placed(m, place) for m in timeline]
        return {"head": head, "messages": messages, "context": api.get(f"/api/conversations/{pk}/context/").json()}
    original, imported = read(chat), read(copy)
    # The first summary was made by a test factory, past the service that counts it and its tokens.
    assert (original["head"].pop("summary_count"), imported["head"].pop("summary_count")) == (0, 1)
    assert original["messages"][-2]["discarded"]
    for side in (original, imported):
        side["messages"][-2]["token_count"] = None
    assert imported == original


def _placed(message: dict[str, Any], place: dict[int, int]) -> dict[str, Any]:
    """A timeline message with the ids it names given as places in the timeline (ids are this server's)."""
    named = ("id", "parent", "reply_to", "covers_from_id", "covers_through_id")
    out = {k: place.get(v, v) if k in named else v for k, v in message.items() if k not in ("conversation", "images")}
    return out | {"images": [{k: v for k, v in i.items() if k not in ("id", "url")} for i in message["images"]]}


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


def test_every_kind_of_stored_message_imports_back_as_it_was(api, user, every_kind_chat):
    """test_api_export's chat (a reply cut at its output limit with its thinking, usage, latency and
    cost, one replaced, one failed with its error, one stopped, an extractive summary, a discarded one
    and its edit) through the file and back, twice. Its rows are written raw, without a tree or token
    counts: the first import threads the path and counts them (as for an export from before branches)
    and changes nothing else; from then on the copy goes through the file unchanged."""
    conversation, _ = every_kind_chat
    original = _export(api, conversation.pk)
    first_copy = _import(api, original, "Trip to Lisbon.json")
    once = _export(api, first_copy.pk)
    second_copy = _import(api, once, "Trip to Lisbon.json")  # a new chat: not one imported before
    assert len({conversation.pk, first_copy.pk, second_copy.pk}) == 3
    twice = _export(api, second_copy.pk)
    assert _without_ids(twice) == _without_ids(once)

    derived = {"token_count", "parent_id", "off_path_by"}
    original_doc, once_doc = _without_ids(original), _without_ids(once)
    assert [{k: v for k, v in m.items() if k not in derived} for m in once_doc["messages"]] == [
        {k: v for k, v in m.items() if k not in derived} for m in original_doc["messages"]]
    # `preference`: its latest turn's, from a record the file does not hold (a copy has none till its first turn).
    assert once_doc["conversation"] == {**original_doc["conversation"], "preference": None}
    assert {m["status"] for m in once_doc["messages"]} == {"complete", "error", "stopped"}
    assert any(m["reasoning"] and m["finish_reason"] == "length" for m in once_doc["messages"])
