"""A chat switched, or started, on a model config deleted (another tab) after the request read it, or
the settings' summary model set to one: a bad `llm_config` / `summary_config`, as for a config not there
(the API's 400, "No such model configuration."), not the database's refusal of a row pointing at
nothing (a 500); nothing changes."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from chatapp.chat.folder_models import Folder
from chatapp.chat.folder_services import folder_create
from chatapp.chat.models import Conversation
from chatapp.chat.selectors import user_settings_get
from chatapp.chat.services import (
    conversation_create,
    conversation_set_config,
    conversation_update,
    user_settings_update,
)
from chatapp.providers.models import LLMConfig
from chatapp.providers.services import llm_config_create


def _config(owner, name: str) -> LLMConfig:
    return llm_config_create(owner=owner, name=name, base_url="https://api.openai.com/v1", model="gpt-4o")


@pytest.mark.django_db(transaction=True)  # committed, as a request is: the chat's link is checked then
def test_a_switch_to_a_config_deleted_meanwhile_is_refused_as_a_missing_one(user):
    kept = _config(user, "Kept")
    chat = conversation_create(owner=user, title="Plan", llm_config=kept)
    stale = _config(user, "Gone")
    LLMConfig.objects.filter(pk=stale.pk).delete()

    with pytest.raises(ValidationError) as refused:
        conversation_set_config(conversation=chat, llm_config=stale)

    assert refused.value.message_dict == {"llm_config": ["No such model configuration."]}
    assert Conversation.objects.get(pk=chat.pk).llm_config_id == kept.pk


@pytest.mark.django_db(transaction=True)
def test_a_chat_started_on_a_config_deleted_meanwhile_is_refused_as_a_missing_one(user):
    stale = _config(user, "Gone")
    LLMConfig.objects.filter(pk=stale.pk).delete()

    with pytest.raises(ValidationError) as refused:
        conversation_create(owner=user, title="Plan", llm_config=stale)

    assert refused.value.message_dict == {"llm_config": ["No such model configuration."]}
    assert not Conversation.objects.filter(owner=user).exists()


@pytest.mark.django_db(transaction=True)
def test_a_summary_model_deleted_meanwhile_is_refused_as_a_missing_one(user):
    stale = _config(user, "Gone")
    LLMConfig.objects.filter(pk=stale.pk).delete()

    with pytest.raises(ValidationError) as refused:
        user_settings_update(user=user, summary_config=stale, preference="quality")

    assert refused.value.message_dict == {"summary_config": ["No such model configuration."]}
    assert user_settings_get(user=user).preference != "quality"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("gone", ["llm_config", "folder"])
def test_a_patch_refused_on_its_last_field_saves_none_of_the_others(user, gone):
    """PATCH /api/conversations/<id>/ wrote its fields one by one: the config or folder deleted in another
    tab since the request read it was refused (a 400) after the rename, the pin and the archive had been
    saved, so the client was told nothing changed while half of it had."""
    kept = _config(user, "Kept")
    chat = conversation_create(owner=user, title="Plan", llm_config=kept)
    stale_config = _config(user, "Gone")
    stale_folder = folder_create(owner=user, name="Gone")
    LLMConfig.objects.filter(pk=stale_config.pk).delete()
    Folder.objects.filter(pk=stale_folder.pk).delete()
    changes = {"title": "Lisbon", "pinned": True, "archived": True, "system_prompt": "Be brief.", gone: 1}

    with pytest.raises(ValidationError) as refused:
        conversation_update(conversation=chat, changes=changes, llm_config=stale_config, folder=stale_folder)

    assert list(refused.value.message_dict) == [gone]
    after = Conversation.objects.get(pk=chat.pk)
    assert (after.title, after.pinned_at, after.archived_at, after.system_prompt, after.llm_config_id) == (
        "Plan", None, None, "", kept.pk)
