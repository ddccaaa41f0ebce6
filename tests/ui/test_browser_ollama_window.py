"""Add a model: a base URL on Ollama's port says, under the context window, that an Ollama server's
window is its own setting (OLLAMA_CONTEXT_LENGTH, a model's num_ctx), not the model's."""

from __future__ import annotations

import pytest

from tests.support.browser import console_errors
from tests.ui.test_browser import _add_model_form, _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_typing_an_ollama_base_url_says_where_its_window_is_set(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "ollama-window")
    base_url, model, note = _add_model_form(browser, asgi_server.url)

    base_url.send_keys("http://localhost:11434/v1")
    model.send_keys("qwen3:8b")

    _wait(browser, lambda d: "OLLAMA_CONTEXT_LENGTH" in note.text)
    assert "4,096 tokens is used" in note.text and "num_ctx" in note.text
    assert not console_errors(browser)
