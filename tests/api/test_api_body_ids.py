"""An id in a request body (a model config, a folder) naming another user's object answers exactly as a
missing id does: a 400 naming the field, not a 404. The address the request was sent to exists and is
the caller's (a 404 would say it is gone), the field says which id is wrong, and a foreign id is told
apart from a missing one by nothing, so nothing of the other user's leaks. Nothing is changed. A send's
`parent` is no lookup at all, only compared with the chat's own latest message: another user's is the
409 of a page left behind, as a missing one is."""

from __future__ import annotations

import pytest

from chatapp.chat.folder_services import folder_create
from chatapp.chat.models import Conversation, Message
from chatapp.providers.services import llm_config_create

pytestmark = pytest.mark.django_db

MISSING = 987_654_321


def _config(owner):
    return llm_config_create(owner=owner, name="Theirs", base_url="https://api.openai.com/v1", model="gpt-4o")


def _answer(response) -> tuple[int, list[str]]:
    body = response.json()
    return response.status_code, sorted(key for key in body if key != "detail")


@pytest.mark.parametrize("field", ["llm_config", "folder"])
def test_a_foreign_id_in_a_chats_patch_answers_as_a_missing_one(api, user, other_user, field):
    chat = Conversation.objects.create(owner=user, title="Mine")
    theirs = (_config(other_user) if field == "llm_config" else folder_create(owner=other_user, name="Theirs")).pk
    path = f"/api/conversations/{chat.pk}/"

    foreign = api.patch(path, {"title": "Changed", field: theirs}, format="json")
    missing = api.patch(path, {"title": "Changed", field: MISSING}, format="json")

    assert _answer(foreign) == _answer(missing) == (400, [field])
    assert foreign.json()["detail"] == missing.json()["detail"]
    chat.refresh_from_db()
    assert (chat.title, chat.llm_config_id, chat.folder_id) == ("Mine", None, None)


def test_a_foreign_config_at_creation_and_in_settings_answers_as_a_missing_one(api, other_user):
    theirs = _config(other_user).pk
    for method, path, field in (("post", "/api/conversations/", "llm_config"),
                                ("patch", "/api/settings/", "summary_config")):
        foreign = getattr(api, method)(path, {field: theirs}, format="json")
        missing = getattr(api, method)(path, {field: MISSING}, format="json")
        assert _answer(foreign) == _answer(missing) == (400, [field]), path
    assert not Conversation.objects.filter(owner__username="ada").exists()


def test_a_foreign_message_as_a_sends_parent_answers_as_a_missing_one(api, user, other_user):
    """`parent` (the message a send answers) naming another user's message: the same 409 as an id that
    does not exist, nothing stored in either chat, and nothing of theirs said."""
    theirs = Conversation.objects.create(owner=other_user, title="Theirs", offline=True)
    their_message = Message.objects.create(conversation=theirs, role="user", content="their secret words")
    mine = Conversation.objects.create(owner=user, title="Mine", offline=True)
    Message.objects.create(conversation=mine, role="user", content="hello")
    path = f"/api/conversations/{mine.pk}/messages/"

    foreign = api.post(path, {"content": "Continue", "parent": their_message.pk}, format="json")
    missing = api.post(path, {"content": "Continue", "parent": MISSING}, format="json")

    assert foreign.status_code == missing.status_code == 409
    assert foreign.json() == missing.json() and "their secret" not in foreign.content.decode()
    assert Message.objects.filter(conversation=mine).count() == 1
    assert list(Message.objects.filter(conversation=theirs)) == [their_message]
