"""The message box keeps its unsent text per chat, for the tab: a reload, or a look at another chat,
gives it back; a message sent leaves no draft behind (static/js/chat/draft.js)."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Conversation
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEPT = "return Object.entries(sessionStorage).filter(([k]) => k.startsWith('longchat:draft:'))"


def _box(browser):
    return browser.find_element(By.ID, "composer-input")


def _drafts(browser) -> dict[str, str]:
    return {key.rsplit(":", 1)[1]: text for key, text in browser.execute_script(KEPT)}


def test_a_draft_survives_a_reload_and_a_visit_elsewhere(asgi_server, browser):
    base = asgi_server.url
    _sign_up(browser, base, "drafter")
    _box(browser).send_keys("a half-written thought about sourdough")
    _wait(browser, lambda d: _drafts(d) == {"new": "a half-written thought about sourdough"})
    browser.refresh()
    _wait(browser, lambda d: _box(d).get_attribute("value") == "a half-written thought about sourdough")

    # Sent: the chat that the message made has no draft, nor has the new-chat page any more.
    _box(browser).send_keys(Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))
    chat = Conversation.objects.get(owner__username="drafter")
    _wait(browser, lambda d: _drafts(d) == {})
    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant"))
    assert _box(browser).get_attribute("value") == ""

    # A draft in this chat waits while another page is open, and is back with the chat.
    _box(browser).send_keys("and what about rye?")
    _wait(browser, lambda d: _drafts(d) == {str(chat.pk): "and what about rye?"})
    browser.get(f"{base}/")
    _wait(browser, lambda d: d.find_elements(By.ID, "composer-input"))
    assert _box(browser).get_attribute("value") == ""
    browser.get(f"{base}/c/{chat.pk}/")
    _wait(browser, lambda d: _box(d).get_attribute("value") == "and what about rye?")
