"""Archiving a chat in a real browser: from the sidebar with the keyboard (the chat leaves the list, the
focus goes to the chat next to it), then on its page (the note says it is archived; its Unarchive
brings it back to the list and gives the focus to the message box); archived again from its header
menu, a message sent in it brings it back."""

from __future__ import annotations

import pytest
from django.utils import timezone
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Conversation
from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up, _wait
from tests.ui.test_browser_pin import _sections
from tests.ui.test_browser_sidebar_rename import _chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_chat_archived_from_the_sidebar_leaves_it_and_its_page_brings_it_back(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "archive-keys")
    trip = _chat("archive-keys", "Lisbon trip")
    groceries = _chat("archive-keys", "Groceries")
    browser.get(f"{asgi_server.url}/c/new/")
    assert _sections(browser) == [("Today", ["Groceries", "Lisbon trip"])]

    row = browser.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{groceries.pk}"]')
    # A keyboard user's way: the row's link, then its Archive button (shown while the row holds the focus).
    for css in (".conv-link", '[data-action="archive-conversation"]'):
        browser.execute_script("arguments[0].focus()", row.find_element(By.CSS_SELECTOR, css))
    ActionChains(browser).send_keys(Keys.ENTER).perform()

    _wait(browser, lambda d: _sections(d) == [("Today", ["Lisbon trip"])])
    focused = browser.switch_to.active_element
    assert focused.get_attribute("class") == "conv-link"
    assert focused.find_element(By.XPATH, "ancestor::li").get_attribute("data-id") == str(trip.pk)
    _wait(browser, lambda d: "Chat archived" in d.find_element(By.ID, "toasts").text)
    assert Conversation.objects.get(pk=groceries.pk).archived_at is not None

    browser.get(f"{asgi_server.url}/c/{groceries.pk}/")  # its link still opens it
    note = browser.find_element(By.ID, "archived-note")
    assert note.is_displayed() and "archived" in note.text
    browser.find_element(By.ID, "conv-menu-btn").click()
    assert browser.find_element(By.CSS_SELECTOR, '#conv-menu [data-action="archive-current"]').text == "Unarchive"
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()

    note.find_element(By.CSS_SELECTOR, "button").click()

    _wait(browser, lambda d: not d.find_element(By.ID, "archived-note").is_displayed())
    _wait(browser, lambda d: _sections(d) == [("Today", ["Groceries", "Lisbon trip"])])
    assert browser.switch_to.active_element.get_attribute("id") == "composer-input"
    assert Conversation.objects.get(pk=groceries.pk).archived_at is None
    browser.find_element(By.ID, "conv-menu-btn").click()
    browser.find_element(By.CSS_SELECTOR, '#conv-menu [data-action="archive-current"]').click()  # "Archive"
    _wait(browser, lambda d: d.find_element(By.ID, "archived-note").is_displayed())
    _wait(browser, lambda d: _sections(d) == [("Today", ["Lisbon trip"])])

    # A message sent in it (the offline demo model answers) brings it back: the note goes.
    browser.find_element(By.ID, "composer-input").send_keys("Still there?", Keys.ENTER)

    _wait(browser, lambda d: _sections(d) == [("Today", ["Groceries", "Lisbon trip"])])
    _wait(browser, lambda d: not d.find_element(By.ID, "archived-note").is_displayed())
    assert Conversation.objects.get(pk=groceries.pk).archived_at is None
    assert console_errors(browser) == []


def test_a_send_brings_back_a_chat_the_sidebars_search_does_not_list_and_its_note_goes(asgi_server, browser):
    # The note learnt that the chat was back only from its row in the list drawn again after the reply:
    # with a search typed that the chat does not match, there was no row, and the note stayed ("This chat
    # is archived"), its menu offering Unarchive, though the send had brought it back.
    _sign_up(browser, asgi_server.url, "archive-search")
    trip = _chat("archive-search", "Lisbon trip")
    Conversation.objects.filter(pk=trip.pk).update(archived_at=timezone.now())
    browser.get(f"{asgi_server.url}/c/{trip.pk}/")
    assert browser.find_element(By.ID, "archived-note").is_displayed()
    browser.find_element(By.ID, "chat-search").send_keys("groceries")
    _wait(browser, lambda d: "No chats match" in d.find_element(By.ID, "conv-nav").text)

    browser.find_element(By.ID, "composer-input").send_keys("Still there?", Keys.ENTER)

    _wait(browser, lambda d: Conversation.objects.get(pk=trip.pk).archived_at is None)
    _wait(browser, lambda d: not d.find_element(By.ID, "archived-note").is_displayed())
    browser.find_element(By.ID, "conv-menu-btn").click()
    assert browser.find_element(By.CSS_SELECTOR, '#conv-menu [data-action="archive-current"]').text == "Archive"
    assert console_errors(browser) == []
