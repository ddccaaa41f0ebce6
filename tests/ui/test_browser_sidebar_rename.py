"""Renaming a chat from the sidebar, in a real browser: every place the row names the chat follows (a
screen reader's Rename and Delete said the old name until a reload), and Esc cancels only the rename
(on a phone it closed the chats drawer too; during a reply, the header's rename Esc stopped the reply)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Conversation, Message
from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up, _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _chat(username: str, title: str) -> Conversation:
    conversation = Conversation.objects.create(owner=get_user_model().objects.get(username=username), title=title,
                                               title_is_custom=True)
    Message.objects.create(conversation=conversation, role="user", content="Where do we sleep in Lisbon?")
    return conversation


def _rename_from_sidebar(browser, conversation: Conversation):
    row = browser.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{conversation.pk}"]')
    # A keyboard user's way: the row's link, then its Rename button (shown while the row holds the focus).
    for css in (".conv-link", '[data-action="rename-conversation"]'):
        browser.execute_script("arguments[0].focus()", row.find_element(By.CSS_SELECTOR, css))
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".conv-rename"))
    return row, browser.find_element(By.CSS_SELECTOR, ".conv-rename")


def test_a_chat_renamed_in_the_sidebar_is_named_everywhere_in_its_row(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "row-rename")
    other = _chat("row-rename", "Lisbon trip with Rufus")
    _chat("row-rename", "Groceries")
    browser.get(f"{asgi_server.url}/c/new/")

    row, field = _rename_from_sidebar(browser, other)
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys("Lisbon trip 2", Keys.ENTER)

    _wait(browser, lambda d: row.find_element(By.CSS_SELECTOR, ".conv-title").text == "Lisbon trip 2")
    assert row.find_element(By.CSS_SELECTOR, ".conv-link").get_attribute("title") == "Lisbon trip 2"
    labels = [b.get_attribute("aria-label") for b in row.find_elements(By.CSS_SELECTOR, "button[data-action]")]
    assert labels == ["Pin “Lisbon trip 2”", "Archive “Lisbon trip 2”", "Rename “Lisbon trip 2”",
                      "Delete “Lisbon trip 2”"]
    assert Conversation.objects.get(pk=other.pk).title == "Lisbon trip 2"
    assert console_errors(browser) == []


def test_esc_in_a_rename_on_a_phone_keeps_the_chats_drawer_open(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "phone-rename")
    conversation = _chat("phone-rename", "Lisbon trip with Rufus")
    browser.set_window_size(390, 844)
    browser.get(f"{asgi_server.url}/c/new/")
    browser.find_element(By.CSS_SELECTOR, ".sidebar-toggle").click()
    app = browser.find_element(By.ID, "app")
    _wait(browser, lambda d: "sidebar-open" in app.get_attribute("class"))
    # The drawer gives its New chat the focus a moment after it opens: the rename begins after that.
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "new-chat")

    row, field = _rename_from_sidebar(browser, conversation)
    field.send_keys("something else", Keys.ESCAPE)

    _wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, ".conv-rename"))
    assert "sidebar-open" in app.get_attribute("class")  # only the rename is cancelled
    assert row.find_element(By.CSS_SELECTOR, ".conv-title").text == "Lisbon trip with Rufus"
    assert Conversation.objects.get(pk=conversation.pk).title == "Lisbon trip with Rufus"


def test_esc_in_the_headers_rename_does_not_stop_the_reply(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "header-rename", fake_url=fake_openai.base_url,
                        model="slow-300", name="Slow echo")
    browser.get(f"{asgi_server.url}/c/new/")
    browser.find_element(By.ID, "composer-input").send_keys("tell me about the tiles of Lisbon", Keys.ENTER)
    reply = lambda d: d.find_element(By.CSS_SELECTOR, ".msg--assistant")  # noqa: E731
    _wait(browser, lambda d: "Echo" in reply(d).text)  # it streams

    browser.find_element(By.CSS_SELECTOR, '[data-action="rename-current"]:not([hidden])').click()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".title-input"))
    browser.find_element(By.CSS_SELECTOR, ".title-input").send_keys("Tiles", Keys.ESCAPE)

    _wait(browser, lambda d: reply(d).get_attribute("data-status") in {"complete", "stopped", "error"}, timeout=60)
    assert reply(browser).get_attribute("data-status") == "complete", reply(browser).text


def test_an_input_methods_enter_or_esc_leaves_the_rename_open(asgi_server, browser):
    # Typing a title with a Japanese or Chinese IME, the Enter that picks the characters (isComposing)
    # saved the title half typed, and its Esc (which drops the composition) cancelled the rename.
    _sign_up(browser, asgi_server.url, "ime-rename")
    conversation = _chat("ime-rename", "Trip")
    browser.get(f"{asgi_server.url}/c/new/")
    _row, field = _rename_from_sidebar(browser, conversation)
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys("東京")

    for key in ("Enter", "Escape"):
        browser.execute_script(
            "arguments[0].dispatchEvent(new KeyboardEvent('keydown', {key: arguments[1], isComposing: true,"
            " keyCode: 229, bubbles: true, cancelable: true}));", field, key)
        assert field.is_displayed()  # still renaming
    field.send_keys("旅行", Keys.ENTER)
    _wait(browser, lambda d: Conversation.objects.get(pk=conversation.pk).title == "東京旅行")
