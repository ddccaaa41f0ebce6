"""An Ollama server gives every model the context length it was started with (4,096 tokens on most
machines), not the model's: a prompt longer than that loses its start without an error. The window
assumed for a model the registry does not know was 8,192 there, and nothing said where the real one is."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

OLLAMA = "http://localhost:11434/v1"


def test_an_unknown_model_on_ollama_is_given_ollamas_window_and_told_where_it_is_set(api):
    info = api.get("/api/configs/model-info/", {"model": "qwen3:8b", "base_url": OLLAMA}).json()
    assert info["context_window_source"] == "default"
    assert info["context_window"] == 4096
    assert "OLLAMA_CONTEXT_LENGTH" in info["context_window_note"] and "num_ctx" in info["context_window_note"]

    compose = api.get("/api/configs/model-info/", {"model": "qwen3:8b", "base_url": "http://ollama:11434/v1"}).json()
    assert compose["context_window"] == 4096 and compose["context_window_note"]
    elsewhere = api.get("/api/configs/model-info/", {"model": "my-model", "base_url": "http://localhost:8000/v1"}).json()
    assert elsewhere["context_window"] == 8192 and elsewhere["context_window_note"] == ""


def test_a_model_saved_on_ollama_says_on_the_settings_page_where_its_window_is_set(api, client, user):
    created = api.post("/api/configs/", {"name": "local", "base_url": OLLAMA, "model": "qwen3:8b"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["context_window"] == 4096

    client.force_login(user)
    page = client.get("/settings/").content.decode()
    help_text = page[page.index('class="field-help window-source"'):]
    help_text = help_text[:help_text.index("</p>")]
    assert "OLLAMA_CONTEXT_LENGTH" in help_text and "num_ctx" in help_text
