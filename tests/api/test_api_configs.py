"""Model configurations and user settings."""

from __future__ import annotations

import json

import pytest

from chatapp.chat.models import UserSettings
from chatapp.providers.models import LLMConfig

pytestmark = pytest.mark.django_db

# A config's answer: every column but its owner and the key's ciphertext (which never leaves the
# server, not even encrypted), with has_api_key in the ciphertext's place. Read from the model rather
# than listed, so that a column added later fails here until it is either sent or kept back on purpose.
COLUMNS = {field.name for field in LLMConfig._meta.concrete_fields}
OUTPUT_FIELDS = (COLUMNS - {"owner", "api_key_encrypted"}) | {"has_api_key", "sees_images"}


def _create(api, **overrides):
    payload = {"name": "OpenAI", "base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini"}
    payload.update(overrides)
    return api.post("/api/configs/", payload, format="json")


def test_config_crud(api, user, plain_key):
    created = _create(api, api_key=plain_key)
    assert created.status_code == 201, created.content
    data = created.json()
    assert set(data) == OUTPUT_FIELDS
    assert data["has_api_key"] is True
    assert data["api_key_last4"] == plain_key[-4:]
    # Known model: the window comes from the registry, and says so.
    assert data["context_window"] > 100_000
    assert data["context_window_source"] == "registry"
    pk = data["id"]

    assert [c["id"] for c in api.get("/api/configs/").json()] == [pk]
    assert api.get(f"/api/configs/{pk}/").json()["name"] == "OpenAI"

    patched = api.patch(f"/api/configs/{pk}/", {"context_window": 50_000, "temperature": 0.2}, format="json")
    assert patched.status_code == 200, patched.content
    assert patched.json()["context_window"] == 50_000
    assert patched.json()["context_window_source"] == "user"
    assert patched.json()["temperature"] == 0.2
    # A patch that does not mention the key keeps it.
    assert patched.json()["has_api_key"] is True

    # null returns the window to the registry's value.
    auto = api.patch(f"/api/configs/{pk}/", {"context_window": None}, format="json").json()
    assert auto["context_window"] == data["context_window"]
    assert auto["context_window_source"] == "registry"

    cleared = api.patch(f"/api/configs/{pk}/", {"clear_api_key": True}, format="json").json()
    assert cleared["has_api_key"] is False and cleared["api_key_last4"] == ""
    assert LLMConfig.objects.get(pk=pk).api_key_encrypted == ""

    assert api.delete(f"/api/configs/{pk}/").status_code == 204
    assert not LLMConfig.objects.filter(pk=pk).exists()


def test_api_key_with_spaces_is_a_field_error(api, user):
    response = _create(api, api_key="sk-has a space-1234567")
    assert response.status_code == 400
    assert "api_key" in response.json()
    assert "sk-has a space" not in response.content.decode()


def test_unknown_model_window_source_default(api, user):
    data = _create(api, model="my-own-finetune-xyz").json()
    assert data["context_window_source"] == "default"
    assert data["context_window"] > data["max_output_tokens"]


def test_make_default(api, user):
    first = _create(api, name="A").json()
    second = _create(api, name="B").json()
    response = api.post(f"/api/configs/{second['id']}/default/")
    assert response.status_code == 200
    assert response.json()["is_default"] is True
    response = api.post(f"/api/configs/{first['id']}/default/")
    assert response.json()["is_default"] is True
    defaults = {c["id"]: c["is_default"] for c in api.get("/api/configs/").json()}
    assert defaults == {first["id"]: True, second["id"]: False}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": ""}, "name"),
        ({"model": ""}, "model"),
        ({"base_url": "not a url"}, "base_url"),
        ({"temperature": 5}, "temperature"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"context_window": -3}, "context_window"),
        ({"context_window": "lots"}, "context_window"),
    ],
)
def test_invalid_config_fields(api, user, overrides, field):
    response = _create(api, **overrides)
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not LLMConfig.objects.exists()


def test_window_must_exceed_max_output(api, user):
    response = _create(api, context_window=1000, max_output_tokens=2000)
    assert response.status_code == 400
    errors = response.json()
    assert set(errors) & {"context_window", "max_output_tokens", "non_field_errors"}
    assert not LLMConfig.objects.exists()


def test_duplicate_name_is_a_field_error(api, user):
    assert _create(api).status_code == 201
    response = _create(api)
    assert response.status_code == 400
    assert "name" in response.json()
    assert LLMConfig.objects.count() == 1


def test_model_info(api, user):
    known = api.get("/api/configs/model-info/", {"model": "gpt-4o-mini"})
    assert known.status_code == 200
    assert known.json()["context_window_source"] == "registry"
    assert known.json()["context_window_source_label"] == "Model registry"
    assert known.json()["context_window"] > 100_000
    assert known.json()["model"] == "gpt-4o-mini"

    unknown = api.get("/api/configs/model-info/", {"model": "totally-unknown-model-123"}).json()
    assert unknown["context_window_source"] == "default"
    assert unknown["context_window"] > 0

    assert api.get("/api/configs/model-info/").status_code == 400


def test_test_connection(api, user, fake_openai):
    ok = _create(api, name="fake", base_url=fake_openai.base_url, model="fake-echo", api_key="good-key-1234").json()
    response = api.post(f"/api/configs/{ok['id']}/test/")
    assert response.status_code == 200
    assert response.json()["ok"] is True
    assert response.json()["message"]

    bad = _create(api, name="bad", base_url=fake_openai.base_url, model="fake-echo", api_key="bad-key-5678").json()
    response = api.post(f"/api/configs/{bad['id']}/test/")
    assert response.status_code == 200
    assert response.json()["ok"] is False
    assert "bad-key-5678" not in response.content.decode()


def test_other_users_configs_answer_404(api, other_user, make_config):
    make_config(other_user, name="Their default")
    theirs = make_config(other_user)
    assert api.get(f"/api/configs/{theirs.pk}/").status_code == 404
    assert api.patch(f"/api/configs/{theirs.pk}/", {"name": "x"}, format="json").status_code == 404
    assert api.delete(f"/api/configs/{theirs.pk}/").status_code == 404
    assert api.post(f"/api/configs/{theirs.pk}/default/").status_code == 404
    assert api.post(f"/api/configs/{theirs.pk}/test/").status_code == 404
    assert api.get("/api/configs/").json() == []
    theirs.refresh_from_db()
    assert theirs.name == "Local" and theirs.is_default is False


# --- Settings -----------------------------------------------------------------------------------------


def test_settings_get_and_patch(api, user, make_config):
    response = api.get("/api/settings/")
    assert response.status_code == 200
    assert response.json()["preference"] == "balanced"
    assert response.json()["auto_optimize"] is True

    response = api.patch("/api/settings/", {"preference": "quality", "auto_optimize": False}, format="json")
    assert response.status_code == 200
    assert response.json()["preference"] == "quality"
    assert response.json()["auto_optimize"] is False
    stored = UserSettings.objects.get(user=user)
    assert (stored.preference, stored.auto_optimize) == ("quality", False)

    # Fields not sent stay as they were.
    response = api.patch("/api/settings/", {"confirm_compaction": True}, format="json")
    assert response.json()["preference"] == "quality"
    assert response.json()["confirm_compaction"] is True

    config = make_config(user)
    response = api.patch("/api/settings/", {"summary_config": config.pk}, format="json")
    assert response.status_code == 200
    assert response.json()["summary_config"] == config.pk
    response = api.patch("/api/settings/", {"summary_config": None}, format="json")
    assert response.json()["summary_config"] is None


def test_settings_unknown_preference_is_a_field_error(api, user):
    response = api.patch("/api/settings/", {"preference": "turbo"}, format="json")
    assert response.status_code == 400
    assert "preference" in response.json()
    assert api.get("/api/settings/").json()["preference"] == "balanced"


@pytest.mark.parametrize("body", [{}, {"preferences": "fast"}, {"custom_instruction": "Answer in French."}])
def test_a_settings_patch_that_sets_none_of_them_is_refused_naming_them(api, body):
    """A misspelt field changed nothing and answered 200, its echo looking like a save."""
    response = api.patch("/api/settings/", body, format="json")

    assert response.status_code == 400
    assert "preference" in response.json()["detail"] and "custom_instructions" in response.json()["detail"]
    assert api.get("/api/settings/").json()["preference"] == "balanced"


@pytest.mark.parametrize("body", [{}, {"nme": "Renamed"}, {"context": 8000}])
def test_a_config_patch_that_sets_none_of_its_fields_is_refused_naming_them(api, body):
    pk = api.post("/api/configs/", {"name": "Local", "base_url": "https://api.openai.com/v1", "model": "gpt-4o"},
                  format="json").json()["id"]

    response = api.patch(f"/api/configs/{pk}/", body, format="json")

    assert response.status_code == 400
    assert "name" in response.json()["detail"] and "context_window" in response.json()["detail"]
    assert api.get(f"/api/configs/{pk}/").json()["name"] == "Local"


def test_settings_someone_elses_summary_config_is_a_field_error(api, other_user, make_config):
    theirs = make_config(other_user)
    response = api.patch("/api/settings/", {"summary_config": theirs.pk}, format="json")
    assert response.status_code == 400
    assert "summary_config" in response.json()


# --- The key never leaves the server ----------------------------------------------------------------


def test_api_key_never_in_any_response(api, user, plain_key, fake_openai):
    created = _create(api, api_key=plain_key).json()
    pk = created["id"]
    fake = _create(api, name="fake", base_url=fake_openai.base_url, model="fail-401", api_key=plain_key).json()
    api.get("/api/configs/")
    api.get(f"/api/configs/{pk}/")
    api.patch(f"/api/configs/{pk}/", {"name": "Renamed"}, format="json")
    api.patch(f"/api/configs/{pk}/", {"api_key": plain_key}, format="json")
    api.post(f"/api/configs/{pk}/default/")
    # The fake endpoint echoes the received key in its 401 message, as a careless proxy would.
    api.post(f"/api/configs/{fake['id']}/test/")
    api.patch("/api/settings/", {"summary_config": pk}, format="json")
    api.get("/api/settings/")
    conversation = api.post("/api/conversations/", {"llm_config": pk}, format="json").json()
    api.get(f"/api/conversations/{conversation['id']}/")
    api.get(f"/api/conversations/{conversation['id']}/context/")
    api.get("/api/schema/", {"format": "json"})

    assert len(api.bodies) >= 14
    encrypted = LLMConfig.objects.get(pk=pk).api_key_encrypted
    assert encrypted
    for content in api.bodies:
        text = content.decode()
        assert plain_key not in text
        assert encrypted not in text
        assert "api_key_encrypted" not in text


def test_a_stored_key_never_follows_a_new_host(api, user, plain_key, fake_openai):
    """Issue 11, finding 3: PATCH base_url alone sent the stored key to the new host. The key is
    cleared (and the response says so); the new host receives no key."""
    pk = _create(api, api_key=plain_key).json()["id"]

    # Same server, another path: the key stays; so it does with the scheme's own port written out.
    same = api.patch(f"/api/configs/{pk}/", {"base_url": "https://api.openai.com/v2"}, format="json")
    assert same.status_code == 200 and same.json()["has_api_key"] is True and "notice" not in same.json()
    port = api.patch(f"/api/configs/{pk}/", {"base_url": "https://api.openai.com:443/v1"}, format="json")
    assert port.status_code == 200 and port.json()["has_api_key"] is True and "notice" not in port.json()
    elsewhere = api.patch(f"/api/configs/{pk}/", {"base_url": "https://api.openai.com:8443/v1"}, format="json")
    assert elsewhere.json()["has_api_key"] is False  # another port is another server
    api.patch(f"/api/configs/{pk}/", {"base_url": "https://api.openai.com/v1", "api_key": plain_key}, format="json")

    moved = api.patch(f"/api/configs/{pk}/", {"base_url": fake_openai.base_url, "model": "fake-echo"}, format="json")

    assert moved.status_code == 200
    assert moved.json()["has_api_key"] is False and "key was cleared" in moved.json()["notice"]
    fake_openai.reset()  # the server is shared by the session's tests
    tested = api.post(f"/api/configs/{pk}/test/")
    assert tested.status_code == 200
    assert fake_openai.requests and all(r.api_key != plain_key for r in fake_openai.requests)
    assert plain_key not in json.dumps([r.headers for r in fake_openai.requests])
    # A new host with its own key keeps that key.
    rekeyed = api.patch(f"/api/configs/{pk}/", {"base_url": "https://llm.example.net/v1", "api_key": "sk-new-key-9876"},
                        format="json")
    assert rekeyed.status_code == 200 and rekeyed.json()["api_key_last4"] == "9876"


@pytest.mark.parametrize("inside", ["\r\n", "\n", "\t", "\x1b", "\x7f"])
def test_a_base_url_holding_a_control_character_is_a_field_error(api, user, fake_openai, inside):
    """Such a URL was stored (Python's URL parser, which the checks read, drops tabs and line breaks
    unseen), then the model client refused it: Test connection answered an HTML 500 and every message
    failed with "Something went wrong"."""
    broken = fake_openai.base_url.replace("/v1", f"/v{inside}1")

    created = _create(api, name="pasted", base_url=broken, model="fake-echo")

    assert created.status_code == 400
    assert "control character" in created.json()["base_url"][0]
    assert not LLMConfig.objects.filter(owner=user).exists()
    pk = _create(api, name="fine", base_url=fake_openai.base_url, model="fake-echo").json()["id"]
    edited = api.patch(f"/api/configs/{pk}/", {"base_url": broken}, format="json")
    assert edited.status_code == 400 and "control character" in edited.json()["base_url"][0]
    assert LLMConfig.objects.get(pk=pk).base_url == fake_openai.base_url
    assert api.post(f"/api/configs/{pk}/test/").json()["ok"] is True


def test_a_host_that_does_not_resolve_yet_is_saved_with_a_notice(api, user, settings):
    """A Docker Compose service named before it is up (http://ollama:11434/v1) does not resolve: it was
    refused ("could not be resolved"), so the config could not be saved until the service ran. The SSRF
    guard needs no lookup at saving: each connection is checked where it is resolved."""
    settings.ALLOW_PRIVATE_LLM_URLS = False
    created = _create(api, base_url="http://ollama-later.invalid:11434/v1", model="llama3.1")
    assert created.status_code == 201, created.content
    assert "does not resolve" in created.json()["notice"]
    pk = created.json()["id"]
    moved = api.patch(f"/api/configs/{pk}/", {"base_url": "http://vllm-later.invalid:8000/v1"}, format="json")
    assert moved.status_code == 200, moved.content
    assert "“vllm-later.invalid” does not resolve" in moved.json()["notice"]
    assert LLMConfig.objects.get(pk=pk).base_url == "http://vllm-later.invalid:8000/v1"
    # A host that resolves to a private address is still refused when saved.
    private = _create(api, name="Local", base_url="http://localhost:11434/v1")
    assert private.status_code == 400 and "loopback" in json.dumps(private.json())


def test_test_connection_warns_of_a_max_output_the_model_cannot_write(api, user, fake_openai):
    """gpt-4o-mini writes at most 16,384 tokens: with 20,000 asked for, the one-token test passed and
    every chat reply was then refused by the endpoint. A warning, not a refusal: the registry may be stale."""
    over = _create(api, name="over", base_url=fake_openai.base_url, model="gpt-4o-mini", api_key="good-key-1234",
                   max_output_tokens=20_000).json()
    response = api.post(f"/api/configs/{over['id']}/test/").json()
    assert response["ok"] is True
    assert "Max output tokens (20,000)" in response["message"]
    assert "at most 16,384" in response["message"]

    within = _create(api, name="within", base_url=fake_openai.base_url, model="gpt-4o-mini",
                     api_key="good-key-1234", max_output_tokens=16_384).json()
    response = api.post(f"/api/configs/{within['id']}/test/").json()
    assert response["ok"] is True and "Max output tokens" not in response["message"]


@pytest.mark.parametrize("base_url, model, window", [
    ("https://api.mistral.ai/v1", "mistral-large-latest", 262_144),
    ("https://api.together.xyz/v1", "meta-llama/Llama-3.3-70B-Instruct-Turbo", 131_072),
    ("https://api.fireworks.ai/inference/v1", "accounts/fireworks/models/deepseek-v3", 131_072),
])
def test_a_provider_s_own_model_name_gets_its_window(api, user, base_url, model, window):
    """Mistral's, Together's and Fireworks' APIs name their models without the prefix litellm's table
    lists them under ("mistral/mistral-large-latest"): the config got the 8,192 default for a model
    of 262,144, and the optimizer cut its chats to fit a window 30 times too small."""
    data = _create(api, name=model, base_url=base_url, model=model).json()
    assert (data["context_window"], data["context_window_source"]) == (window, "registry")
    hint = api.get("/api/configs/model-info/", {"model": model, "base_url": base_url}).json()
    assert (hint["context_window"], hint["context_window_source"]) == (window, "registry")


def test_another_host_does_not_borrow_a_provider_s_entry_until_the_config_moves_there(api, user):
    data = _create(api, name="proxy", base_url="https://llm.example.net/v1", model="mistral-large-latest").json()
    assert data["context_window_source"] == "default"
    moved = api.patch(f"/api/configs/{data['id']}/", {"base_url": "https://api.mistral.ai/v1"}, format="json").json()
    assert (moved["context_window"], moved["context_window_source"]) == (262_144, "registry")


def test_test_connection_reads_a_provider_s_own_output_limit(api, user, monkeypatch):
    """Fireworks' deepseek-v3 writes at most 8,192 tokens: its entry is found by the endpoint's host."""
    config = _create(api, name="fw", base_url="https://api.fireworks.ai/inference/v1",
                     model="accounts/fireworks/models/deepseek-v3", max_output_tokens=10_000).json()
    # No request leaves: the registry alone is read, by the endpoint's host.
    monkeypatch.setattr("chatapp.providers.api.llm_test_connection", lambda *, target: (True, "Connected."))
    message = api.post(f"/api/configs/{config['id']}/test/").json()["message"]
    assert "Max output tokens (10,000)" in message and "at most 8,192" in message


@pytest.mark.parametrize("base_url", [
    "https://api.exa mple.com/v1",  # a space typed in the host
    "https://api.example.com/v 1",
    "https://-api.example.com/v1",
])
def test_a_base_url_the_settings_form_refuses_is_refused_by_the_api_too(api, user, client, base_url):
    """The form said "Enter a valid URL."; the API saved it (its host "does not resolve (yet)"), and every
    chat with the model then failed."""
    client.force_login(user)
    form = client.post("/settings/configs/new/", {
        "new-name": "Typo", "new-base_url": base_url, "new-model": "gpt-4o-mini", "new-max_output_tokens": "100",
        "new-temperature": "0.3"})
    assert form.status_code == 400

    answer = _create(api, base_url=base_url)
    assert answer.status_code == 400
    assert answer.json()["base_url"] == ["Enter a valid URL, such as https://api.openai.com/v1."]
    assert not LLMConfig.objects.filter(owner=user).exists()


@pytest.mark.parametrize("base_url", ["https://[zz]/v1", "https://[::1/v1", "https://a]b/v1"])
@pytest.mark.parametrize("with_key", [False, True])
def test_an_edit_to_a_base_url_with_broken_brackets_is_a_field_error(api, user, plain_key, base_url, with_key):
    """Creating such a config answered the field error, but an edit to it answered a 500: the edit reads
    the new URL's server (whether the key stays, whether the window follows) before validating it, and
    Python's URL parser raises on a bracketed host that is no IPv6 address."""
    pk = _create(api, **({"api_key": plain_key} if with_key else {})).json()["id"]

    edited = api.patch(f"/api/configs/{pk}/", {"base_url": base_url}, format="json")

    assert edited.status_code == 400
    assert edited.json()["base_url"] == ["Enter a valid URL, such as https://api.openai.com/v1."]
    config = LLMConfig.objects.get(pk=pk)
    assert (config.base_url, config.has_api_key) == ("https://api.openai.com/v1", with_key)


@pytest.mark.parametrize("where", ["api", "settings page"])
def test_making_default_a_config_deleted_meanwhile_keeps_the_default(api, user, client, monkeypatch, where):
    """Make default pressed on a config another tab deleted after this request found it: the default
    was taken off the config that had it and given to none (the update found no row), then reading
    the config back answered a 500, and the user's new chats went to the offline demo model."""
    from chatapp.chat import settings_views
    from chatapp.providers import api as config_api

    kept = _create(api, name="Kept").json()
    gone = _create(api, name="Gone").json()
    module = config_api if where == "api" else settings_views.config_selectors
    real = module.llm_config_get

    def found_then_deleted(*, owner, pk):
        config = real(owner=owner, pk=pk)
        LLMConfig.objects.filter(pk=pk).delete()  # the other tab's Delete, between this read and the write
        return config

    monkeypatch.setattr(module, "llm_config_get", found_then_deleted)
    client.force_login(user)
    answer = (api.post(f"/api/configs/{gone['id']}/default/") if where == "api"
              else client.post(f"/settings/configs/{gone['id']}/default/"))

    assert answer.status_code == 404
    assert list(LLMConfig.objects.filter(owner=user, is_default=True).values_list("pk", flat=True)) == [kept["id"]]
