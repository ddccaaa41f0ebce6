"""Model config, user settings and conversation services."""

from __future__ import annotations

import logging

import pytest
from django.core.exceptions import ValidationError

from chatapp.chat import services
from chatapp.chat.models import Conversation, UserSettings
from chatapp.providers import llm
from chatapp.providers import services as config_services
from chatapp.providers.crypto import secret_decrypt
from chatapp.providers.models import LLMConfig

KEY = "sk-proj-SECRETVALUE-abcdefgh9876"
pytestmark = pytest.mark.django_db


def _create(owner, **overrides) -> LLMConfig:
    fields = {"name": "OpenAI", "base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini"}
    return config_services.llm_config_create(owner=owner, **{**fields, **overrides})


def _field_errors(info) -> dict:
    return info.value.message_dict


# --- context window ------------------------------------------------------------------------------


def test_window_from_registry_for_a_known_model(user):
    config = _create(user, model="gpt-4o-mini")
    assert (config.context_window, config.context_window_source) == (128000, "registry")


def test_window_from_registry_for_an_openai_fine_tune(user):
    # Its id adds organization, suffix and job to the base's: the window fell to the 8,192 default.
    config = _create(user, model="ft:gpt-4o-mini-2024-07-18:acme::9ABCdef1")
    assert (config.context_window, config.context_window_source) == (128000, "registry")


def test_window_default_for_an_unknown_model(user):
    config = _create(user, model="my-local-finetune")
    assert (config.context_window, config.context_window_source) == (8192, "default")


def test_window_override_is_recorded_as_the_users(user):
    config = _create(user, model="gpt-4o-mini", context_window=32000)
    assert (config.context_window, config.context_window_source) == (32000, "user")


def test_model_window_lookup():
    assert config_services.model_window_lookup(model="gpt-4o-mini") == (128000, "registry")
    assert config_services.model_window_lookup(model="nobody-knows-me") == (8192, "default")


def test_update_window_follows_the_model_unless_overridden(user):
    config = _create(user, model="my-local-finetune")
    config = config_services.llm_config_update(config=config, model="gpt-4o-mini")
    assert (config.context_window, config.context_window_source) == (128000, "registry")

    # A form re-submitting the automatic value it was shown is not an override.
    config = config_services.llm_config_update(config=config, context_window=128000, name="Renamed")
    assert config.context_window_source == "registry"

    config = config_services.llm_config_update(config=config, context_window=64000)
    assert (config.context_window, config.context_window_source) == (64000, "user")
    config = config_services.llm_config_update(config=config, model="my-local-finetune")
    assert (config.context_window, config.context_window_source) == (64000, "user")

    config = config_services.llm_config_update(config=config, context_window=None)  # back to automatic
    assert (config.context_window, config.context_window_source) == (8192, "default")


# --- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"context_window": 1000, "max_output_tokens": 1000}, "context_window", "must be larger than max output"),
        ({"model": "my-local-finetune", "max_output_tokens": 9000}, "max_output_tokens", "smaller than the model's"),
        ({"max_output_tokens": 0}, "max_output_tokens", "positive"),
        ({"context_window": -5}, "context_window", "positive"),
        ({"context_window": "lots"}, "context_window", "whole number"),
        ({"temperature": 2.5}, "temperature", "from 0 to 2"),
        ({"temperature": -0.1}, "temperature", "from 0 to 2"),
        ({"temperature": float("nan")}, "temperature", "from 0 to 2"),
        ({"base_url": "not a url"}, "base_url", "http:// or https://"),
        ({"base_url": ""}, "base_url", "required"),
        # Each request's path would be added after the query (…/v1?api-version=1/chat/completions).
        ({"base_url": "https://api.example.com/v1?api-version=2024-06-01"}, "base_url", "no query"),
        ({"name": "   "}, "name", "required"),
        ({"name": "\u200b"}, "name", "required"),  # nothing shows: a blank entry in the model menu
        ({"model": ""}, "model", "required"),
        ({"api_key": "sk bad key"}, "api_key", "spaces"),
    ],
)
def test_invalid_fields_are_reported_by_name(user, overrides, field, words):
    with pytest.raises(ValidationError) as info:
        _create(user, **overrides)
    assert any(words in m for m in _field_errors(info)[field])
    assert not LLMConfig.objects.exists()


@pytest.mark.parametrize(("model", "words"), [
    ("my-local-finetune", "Max output tokens (9,000) must be smaller than the model's context window, which the "
                          "model registry does not know: 8,192 tokens is assumed. Enter the model's context window."),
    ("gpt-4o-mini", "Max output tokens (200,000) must be smaller than the model's context window (128,000)."),
])
def test_an_output_past_the_window_says_whether_the_window_is_known(user, model, words):
    """A model the registry does not know was said to have a context window of 8,192 tokens, the default
    assumed for it: the user lowered the max output instead of entering the window."""
    with pytest.raises(ValidationError) as info:
        _create(user, model=model, max_output_tokens=9_000 if model == "my-local-finetune" else 200_000)
    assert _field_errors(info)["max_output_tokens"] == [words]


@pytest.mark.parametrize("pasted", ["https://openrouter.ai/api/v1/chat/completions",
                                    "https://openrouter.ai/api/v1/Chat/Completions/"])
def test_a_base_url_pasted_with_the_endpoint_path_is_kept_without_it(user, pasted):
    # Providers' docs show the whole endpoint; the client adds /chat/completions to the base itself.
    assert _create(user, base_url=pasted).base_url == "https://openrouter.ai/api/v1"


def test_names_are_unique_per_owner(user, other_user):
    _create(user, name="Work")
    _create(other_user, name="Work")
    with pytest.raises(ValidationError) as info:
        _create(user, name="Work")
    assert "name" in _field_errors(info)


def test_private_base_url_follows_the_setting(user, settings):
    settings.ALLOW_PRIVATE_LLM_URLS = False
    with pytest.raises(ValidationError) as info:
        _create(user, base_url="http://127.0.0.1:11434/v1")
    assert "loopback" in _field_errors(info)["base_url"][0]

    settings.ALLOW_PRIVATE_LLM_URLS = True
    assert _create(user, base_url="http://127.0.0.1:11434/v1").base_url == "http://127.0.0.1:11434/v1"


# --- default handling ----------------------------------------------------------------------------


def _defaults(owner) -> list[str]:
    return list(LLMConfig.objects.filter(owner=owner, is_default=True).values_list("name", flat=True))


def test_first_config_becomes_default_and_explicit_default_swaps(user):
    _create(user, name="A")
    _create(user, name="B")
    assert _defaults(user) == ["A"]
    _create(user, name="C", is_default=True)
    assert _defaults(user) == ["C"]


def test_make_default_and_delete_promotes_another(user):
    a = _create(user, name="A")
    b = _create(user, name="B")
    _create(user, name="C")
    b = config_services.llm_config_make_default(config=b)
    assert b.is_default and _defaults(user) == ["B"]

    assert config_services.llm_config_delete(config=b) == LLMConfig.objects.get(name="A")  # the new default
    assert _defaults(user) == ["A"]
    config_services.llm_config_delete(config=a)
    assert _defaults(user) == ["C"]
    assert config_services.llm_config_delete(config=LLMConfig.objects.get(name="C")) is None
    assert not LLMConfig.objects.filter(owner=user).exists()


def test_default_cannot_be_unset_directly(user):
    config = _create(user)
    with pytest.raises(ValidationError) as info:
        config_services.llm_config_update(config=config, is_default=False)
    assert "is_default" in _field_errors(info)


def test_update_with_is_default_true_swaps(user):
    _create(user, name="A")
    b = _create(user, name="B")
    config_services.llm_config_update(config=b, is_default=True)
    assert _defaults(user) == ["B"]


def test_unknown_update_field_is_a_programming_error(user):
    with pytest.raises(TypeError):
        config_services.llm_config_update(config=_create(user), owner=None)


# --- API key -------------------------------------------------------------------------------------


def test_api_key_is_encrypted_write_only_and_never_shown(user, caplog):
    caplog.set_level(logging.DEBUG)
    config = _create(user, api_key=f"  {KEY}\n")

    config.refresh_from_db()
    assert KEY not in config.api_key_encrypted
    assert secret_decrypt(config.api_key_encrypted) == KEY
    assert config.api_key_last4 == KEY[-4:] and config.has_api_key
    target = llm.llm_target_for(config=config)
    assert target.api_key == KEY
    for text in (repr(config), str(config), repr(target), str(target), caplog.text):
        assert KEY not in text


@pytest.mark.parametrize("pasted", [f'"{KEY}"', f"'{KEY}'", f"Bearer {KEY}", f"bearer  {KEY}", f'Bearer "{KEY}"'])
def test_a_key_pasted_with_its_quotes_or_bearer_is_stored_as_the_key(user, pasted):
    # As copied from a .env file (OPENAI_API_KEY="sk-...") or a curl command (Authorization: Bearer sk-...):
    # stored as it was, every request was refused (401), the quotes or "Bearer " sent inside the header.
    config = _create(user, api_key=pasted)
    assert secret_decrypt(config.api_key_encrypted) == KEY and config.api_key_last4 == KEY[-4:]
    config = config_services.llm_config_update(config=config, api_key=pasted.replace(KEY, "sk-second-key-0000"))
    assert secret_decrypt(config.api_key_encrypted) == "sk-second-key-0000"


def test_short_keys_show_no_last_four(user):
    assert _create(user, api_key="abc123").api_key_last4 == ""


def test_empty_key_on_update_keeps_clear_flag_removes(user):
    config = _create(user, api_key=KEY)
    config = config_services.llm_config_update(config=config, api_key="", temperature=0.2)
    assert secret_decrypt(config.api_key_encrypted) == KEY and config.temperature == 0.2

    config = config_services.llm_config_update(config=config, api_key="sk-replacement-key-0000")
    assert secret_decrypt(config.api_key_encrypted) == "sk-replacement-key-0000"
    assert config.api_key_last4 == "0000"

    config = config_services.llm_config_update(config=config, clear_api_key=True)
    config.refresh_from_db()
    assert (config.api_key_encrypted, config.api_key_last4, config.has_api_key) == ("", "", False)


def test_undecryptable_key_marks_the_target_not_a_crash(user, settings):
    import base64

    config = _create(user, api_key=KEY)
    settings.FIELD_ENCRYPTION_KEYS = [base64.urlsafe_b64encode(b"9" * 32).decode()]
    target = llm.llm_target_for(config=config)
    assert target.api_key == "" and target.key_unreadable
    ok, message = llm.llm_test_connection(target=target)
    assert not ok and "Enter the key again" in message


# --- user settings -------------------------------------------------------------------------------


def test_user_settings_update(user, other_user):
    mine = _create(user)
    theirs = _create(other_user)

    result = services.user_settings_update(user=user, preference="quality", auto_optimize=False)
    assert (result.preference, result.auto_optimize) == ("quality", False)
    result = services.user_settings_update(user=user, summary_config=mine)
    assert result.summary_config == mine and result.preference == "quality"
    result = services.user_settings_update(user=user, confirm_compaction=True)
    assert result.summary_config == mine  # omitted: unchanged
    result = services.user_settings_update(user=user, summary_config=None)
    assert result.summary_config is None
    assert UserSettings.objects.filter(user=user).count() == 1

    with pytest.raises(ValidationError) as info:
        services.user_settings_update(user=user, preference="turbo", summary_config=theirs)
    assert set(_field_errors(info)) == {"preference", "summary_config"}


# --- conversations ---------------------------------------------------------------------------------


def test_conversation_create_rename_delete(user, other_user):
    conversation = services.conversation_create(owner=user)
    assert (conversation.title, conversation.title_is_custom, conversation.llm_config) == ("New chat", False, None)

    renamed = services.conversation_rename(conversation=conversation, title="  Trip\nplans  ")
    assert (renamed.title, renamed.title_is_custom) == ("Trip plans", True)
    with pytest.raises(ValidationError) as info:
        services.conversation_rename(conversation=conversation, title="   ")
    assert "title" in _field_errors(info)
    with pytest.raises(ValidationError):
        services.conversation_rename(conversation=conversation, title="x" * 201)

    with pytest.raises(ValidationError) as info:
        services.conversation_create(owner=user, llm_config=_create(other_user))
    assert "llm_config" in _field_errors(info)

    services.conversation_delete(conversation=conversation)
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


def test_conversation_with_a_config_and_title(user):
    config = _create(user)
    conversation = services.conversation_create(owner=user, title="Named", llm_config=config)
    assert (conversation.title, conversation.title_is_custom, conversation.llm_config) == ("Named", True, config)


@pytest.mark.parametrize("stale", ["A", "B"])
def test_an_edit_read_before_a_make_default_elsewhere_keeps_one_default(user, stale):
    """Another tab makes B the default while this edit's request holds its copy of A or B, read
    before: the edit changes only its own fields and B stays the one default."""
    a = config_services.llm_config_create(owner=user, name="A", base_url="https://api.openai.com/v1",
                                          model="gpt-4o-mini", api_key="sk-aaaa-1111")
    b = config_services.llm_config_create(owner=user, name="B", base_url="https://api.openai.com/v1",
                                          model="gpt-4o-mini")
    copy = LLMConfig.objects.get(pk=(a if stale == "A" else b).pk)
    config_services.llm_config_make_default(config=LLMConfig.objects.get(pk=b.pk))
    config_services.llm_config_update(config=LLMConfig.objects.get(pk=a.pk), api_key="sk-bbbb-2222")  # meanwhile

    config_services.llm_config_update(config=copy, name=f"{stale} renamed", temperature=0.3)

    defaults = list(LLMConfig.objects.filter(owner=user, is_default=True).values_list("pk", flat=True))
    assert defaults == [b.pk]
    assert LLMConfig.objects.get(pk=copy.pk).name == f"{stale} renamed"
    assert secret_decrypt(LLMConfig.objects.get(pk=a.pk).api_key_encrypted) == "sk-bbbb-2222"  # not written back
