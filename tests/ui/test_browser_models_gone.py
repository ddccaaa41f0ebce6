"""A model deleted in another tab, on a page drawn before: its Settings card and the chat's model menu
say so in plain words."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from chatapp.chat.models import Conversation
from chatapp.providers.models import LLMConfig
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_testing_a_model_deleted_in_another_tab_says_it_is_gone(asgi_server, browser, fake_openai):
    user, _ = _sign_up_with_model(browser, asgi_server.url, "gone-test", fake_url=fake_openai.base_url,
                                  model="fake-echo", name="Echo")
    gone = LLMConfig.objects.create(owner=user, name="Gone", base_url=fake_openai.base_url, model="fake-echo",
                                    context_window=16_000, max_output_tokens=500)
    browser.get(f"{asgi_server.url}/settings/")
    LLMConfig.objects.filter(pk=gone.pk).delete()

    browser.find_element(By.CSS_SELECTOR, f'[data-action="test-config"][data-id="{gone.pk}"]').click()

    result = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f"#test-result-{gone.pk}.is-fail"))[0]
    # it read "No LLMConfig matches the given query."
    assert result.text == "✗ This model no longer exists: it was deleted (in another tab or device?)."


def _menu_names(browser) -> list[str]:
    return [option.text for option in Select(browser.find_element(By.ID, "model-select")).options]


def _chat_open_then_model_deleted(browser, url: str, fake_url: str, username: str, *, on_gone: bool):
    """A user with models Echo (the default) and Gone, a chat on Gone (`on_gone`) or on Echo open in the
    browser, and then Gone deleted, as in another tab (a chat on it follows the default): the user."""
    user, config = _sign_up_with_model(browser, url, username, fake_url=fake_url, model="fake-echo", name="Echo")
    gone = LLMConfig.objects.create(owner=user, name="Gone", base_url=fake_url, model="fake-echo",
                                    context_window=16_000, max_output_tokens=500)
    conversation = Conversation.objects.create(owner=user, title="Chat", llm_config=gone if on_gone else config)
    browser.get(f"{url}/c/{conversation.pk}/")
    shown = Select(browser.find_element(By.ID, "model-select")).first_selected_option.text
    assert shown == ("Gone" if on_gone else "Echo")
    LLMConfig.objects.filter(pk=gone.pk).delete()
    return user


def test_switching_a_chat_to_a_model_deleted_in_another_tab_says_it_is_gone(asgi_server, browser, fake_openai):
    _chat_open_then_model_deleted(browser, asgi_server.url, fake_openai.base_url, "gone-switch", on_gone=False)

    Select(browser.find_element(By.ID, "model-select")).select_by_visible_text("Gone")

    toast = _wait(browser, lambda d: [t for t in d.find_elements(By.CSS_SELECTOR, ".toast") if t.text])[0]
    # it read "llm_config: No such model configuration.", and the menu kept offering it
    assert toast.text == "“Gone” no longer exists: it was deleted (in another tab or device?)."
    assert _menu_names(browser) == ["Echo", "Offline demo model"]
    assert Select(browser.find_element(By.ID, "model-select")).first_selected_option.text == "Echo"


def test_a_new_chat_on_a_model_deleted_in_another_tab_keeps_the_message_and_says_so(asgi_server, browser,
                                                                                     fake_openai):
    user, _ = _sign_up_with_model(browser, asgi_server.url, "gone-new", fake_url=fake_openai.base_url,
                                  model="fake-echo", name="Echo")
    gone = LLMConfig.objects.create(owner=user, name="Gone", base_url=fake_openai.base_url, model="fake-echo",
                                    context_window=16_000, max_output_tokens=500)
    browser.get(f"{asgi_server.url}/c/new/")
    Select(browser.find_element(By.ID, "model-select")).select_by_visible_text("Gone")
    LLMConfig.objects.filter(pk=gone.pk).delete()
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("Which model is this?", Keys.ENTER)

    error = _wait(browser, lambda d: d.find_elements(By.ID, "composer-error"))[0]
    # every send said "Could not start a new chat: llm_config: No such model configuration." until a reload
    assert error.text == ("Could not start a new chat: “Gone” no longer exists: it was deleted (in another tab or "
                          "device?). Send again to use “Echo”.")
    assert box.get_attribute("value") == "Which model is this?"
    assert _menu_names(browser) == ["Echo", "Offline demo model"]

    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))
    assert Conversation.objects.get(owner=user).llm_config.name == "Echo"


def test_a_send_in_a_chat_whose_model_was_deleted_elsewhere_shows_the_model_that_answered(asgi_server, browser,
                                                                                          fake_openai):
    _chat_open_then_model_deleted(browser, asgi_server.url, fake_openai.base_url, "gone-send", on_gone=True)

    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("Hello", Keys.ENTER)

    # the menu went on naming "Gone" until a reload, though "Echo" answered
    _wait(browser, lambda d: Select(d.find_element(By.ID, "model-select")).first_selected_option.text == "Echo")
    assert box.get_attribute("placeholder") == "Message Echo…"
