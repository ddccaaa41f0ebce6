"""A form-encoded or multipart body (curl -d, a script's requests.patch(data=...)) means what the same
fields in JSON mean: a field left out is left as it is. DRF reads a boolean missing from such a body as
false (an HTML checkbox left unticked sends nothing), so a PATCH naming one field turned others off."""

from __future__ import annotations

import pytest

from chatapp.chat.models import Conversation, UserSettings

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("fmt", ["multipart", None])  # None: the client's form encoding by hand
def test_a_form_patch_of_one_preference_leaves_the_others_on(api, user, fmt):
    on = {"auto_optimize": True, "confirm_compaction": True, "generate_titles": True}
    assert api.patch("/api/settings/", on, format="json").status_code == 200

    if fmt is None:
        answer = api.patch("/api/settings/", "preference=fast", content_type="application/x-www-form-urlencoded")
    else:
        answer = api.patch("/api/settings/", {"preference": "fast"}, format=fmt)

    assert answer.status_code == 200
    assert {name: answer.json()[name] for name in on} == on
    stored = UserSettings.objects.get(user=user)
    assert (stored.preference, stored.auto_optimize, stored.confirm_compaction, stored.generate_titles) == (
        "fast", True, True, True)


def test_a_form_rename_keeps_an_offline_chat_on_the_offline_model(api, user, make_config):
    make_config(user)  # the default config a chat leaving the demo would move to
    conversation = Conversation.objects.create(owner=user, title="Demo", offline=True)

    answer = api.patch(f"/api/conversations/{conversation.pk}/", "title=Renamed",
                       content_type="application/x-www-form-urlencoded")

    assert answer.status_code == 200
    assert (answer.json()["title"], answer.json()["offline"], answer.json()["llm_config"]) == ("Renamed", True, None)
    conversation.refresh_from_db()
    assert (conversation.offline, conversation.llm_config_id) == (True, None)


def test_a_form_pin_without_pinned_is_a_400_and_unpins_nothing(api, user, make_conversation):
    message = make_conversation(user, messages=2).messages.first()
    assert api.post(f"/api/messages/{message.pk}/pin/", {"pinned": True}, format="json").status_code == 200

    answer = api.post(f"/api/messages/{message.pk}/pin/", "", content_type="application/x-www-form-urlencoded")

    assert answer.status_code == 400 and "pinned" in answer.json()
    message.refresh_from_db()
    assert message.pinned is True
