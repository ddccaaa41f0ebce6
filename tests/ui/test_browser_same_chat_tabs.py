"""One chat open in two tabs (or on two devices): what is said in one shows in the other without a
reload or a send of its own (it showed only once that tab sent, or was reloaded), and the message
being typed there stays as it was."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.message_services import message_append
from chatapp.chat.models import Message
from chatapp.chat.services import conversation_delete
from chatapp.providers.models import LLMConfig
from tests.support.browser import console_errors, tabs_close_but
from tests.ui.test_browser import _send, _sign_up_with_model, _wait
from tests.ui.test_browser_sidebar_rename import _chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _texts(driver) -> list[str]:
    return [m.get_attribute("textContent") for m in driver.find_elements(By.CSS_SELECTOR, "#messages .msg-content")]


def _shows(driver, words: str) -> bool:
    return any(words in text for text in _texts(driver))


@pytest.fixture
def same_chat(asgi_server, browser, fake_openai):
    """A user's chat open in two tabs, a draft typed in the second: (first tab, second tab, chat)."""
    _sign_up_with_model(
        browser, asgi_server.url, "same-chat", fake_url=fake_openai.base_url, model="slow-150", name="Slow"
    )
    chat = _chat("same-chat", "Lisbon trip")
    browser.get(f"{asgi_server.url}/c/{chat.pk}/")
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(f"{asgi_server.url}/c/{chat.pk}/")
    second = browser.current_window_handle
    box = _wait(browser, lambda d: d.find_element(By.ID, "composer-input"))
    box.send_keys("half a thought")
    yield first, second, chat
    tabs_close_but(browser, first)


def test_a_turn_in_one_tab_shows_in_the_other_its_draft_kept(browser, same_chat):
    first, second, chat = same_chat
    browser.switch_to.window(first)
    _send(browser, "Which day do we leave?")
    reply = Message.objects.filter(conversation=chat, role="assistant").get()

    browser.switch_to.window(second)
    _wait(browser, lambda d: _shows(d, "Which day do we leave?"), timeout=15)
    _wait(browser, lambda d: d.find_element(By.ID, f"m-{reply.pk}").get_attribute("data-status") == "complete",
          timeout=15)
    assert browser.find_element(By.ID, "composer-input").get_attribute("value") == "half a thought"
    # Regenerate belongs to the newest reply: the one shown here now, as in the tab that sent
    assert "is-last" in browser.find_element(By.ID, f"m-{reply.pk}").get_attribute("class")
    assert console_errors(browser) == []


def test_a_tab_shown_again_shows_what_another_device_said_meanwhile(browser, same_chat):
    _, second, chat = same_chat
    browser.switch_to.window(second)
    # another device's turn: the browser hears nothing of it
    asked = message_append(conversation=chat, role="user", content="Do we need a car?", token_model="gpt-4o-mini")
    message_append(conversation=chat, role="assistant", content="No, the trams go everywhere.",
                   token_model="gpt-4o-mini", parent=asked, reply_to=asked)

    # the user looks at another tab, then comes back to this one
    browser.switch_to.new_window("tab")
    browser.close()
    browser.switch_to.window(second)
    _wait(browser, lambda d: _shows(d, "the trams go everywhere"), timeout=15)
    assert _shows(browser, "Do we need a car?")
    assert browser.find_element(By.ID, "composer-input").get_attribute("value") == "half a thought"
    assert console_errors(browser) == []


def test_a_tab_shown_again_says_the_chat_was_deleted_on_another_device(browser, same_chat):
    """The read on coming back found the chat gone (a 404) and said nothing: the page went on showing it
    as if it were kept, until a send was refused."""
    _, second, chat = same_chat
    browser.switch_to.window(second)
    conversation_delete(conversation=chat)  # another device: the browser hears nothing of it

    browser.switch_to.new_window("tab")
    browser.close()
    browser.switch_to.window(second)
    _wait(browser, lambda d: "no longer exists" in d.find_element(By.ID, "toasts").text, timeout=15)
    assert browser.find_element(By.ID, "composer-input").get_attribute("value") == "half a thought"


def test_a_reply_streaming_in_one_tab_is_stopped_from_the_other(browser, same_chat):
    first, second, chat = same_chat
    LLMConfig.objects.filter(owner=chat.owner).update(model="slow-800")  # long enough to be stopped
    browser.switch_to.window(first)
    browser.find_element(By.ID, "composer-input").send_keys("Tell me about the trams", Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming[data-id]"))

    browser.switch_to.window(second)
    stop = browser.find_element(By.ID, "stop-btn")
    _wait(browser, lambda d: stop.is_displayed(), timeout=15)  # the reply shown here, followed
    stop.click()
    reply = Message.objects.get(conversation=chat, role="assistant")
    _wait(browser, lambda d: d.find_element(By.ID, f"m-{reply.pk}").get_attribute("data-status") == "stopped",
          timeout=15)
    assert browser.find_element(By.ID, "composer-input").get_attribute("value") == "half a thought"

    browser.switch_to.window(first)
    _wait(browser, lambda d: d.find_element(By.ID, f"m-{reply.pk}").get_attribute("data-status") == "stopped",
          timeout=15)
    assert console_errors(browser) == []
