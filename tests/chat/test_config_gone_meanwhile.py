"""A chat switched, or started, on a model config deleted (another tab) after the request read it, or
the settings' summary model set to one: a bad `llm_config` / `summary_config`, as for a config not there
(the API's 400, "No such model configuration."), not the database's refusal of a row pointing at
nothing (a 500); nothing changes."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from chatapp.chat.models import Conversation
from chatapp.chat.selectors import user_settings_get
from chatapp.chat.services import conversation_create, conversation_set_config, user_settings_update
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
