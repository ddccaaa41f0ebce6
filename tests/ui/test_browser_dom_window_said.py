""""Load earlier messages" and "Load newer messages" in headless Chromium say what they brought
(static/js/chat/history.js, window.js): a screen reader heard nothing when a page of messages came in
above or below, nor that the chat's first message or its end was reached."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _wait
from tests.ui.test_browser_dom_window import SHOWN, _chat, _press
from tests.ui.test_browser_reload_midstream import _said

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_loading_earlier_and_newer_messages_says_how_many_came(asgi_server, browser):
    _, ids = _chat(browser, asgi_server.url, "dom-said", 450)
    _press(browser, "load-earlier")
    assert _said(browser) == "100 earlier messages loaded."
    _press(browser, "load-earlier")
    assert _said(browser) == "100 earlier messages loaded."  # the same words again: said again (announce)
    _press(browser, "load-earlier")
    shown = _press(browser, "load-earlier")
    assert shown[0] == ids[0]
    assert _said(browser) == "50 earlier messages loaded: this is the start of the chat."

    shown = _press(browser, "load-newer")
    assert shown[-1] == ids[399]
    assert _said(browser) == "100 newer messages loaded."
    shown = _press(browser, "load-newer")
    assert shown[-1] == ids[-1]
    assert _said(browser) == "50 newer messages loaded: this is the end of the chat."
    assert console_errors(browser) == []


def test_load_earlier_from_the_keyboard_keeps_the_focus_and_says_what_came(asgi_server, browser):
    _chat(browser, asgi_server.url, "dom-said-keys", 250)
    earlier = browser.find_element(By.CSS_SELECTOR, '[data-action="load-earlier"]')
    browser.execute_script("arguments[0].focus({preventScroll: true})", earlier)
    before = browser.execute_script(SHOWN)
    earlier.send_keys(Keys.ENTER)
    _wait(browser, lambda d: d.execute_script(SHOWN) != before and earlier.is_enabled())
    assert browser.switch_to.active_element == earlier
    assert _said(browser) == "100 earlier messages loaded."
    # The last page: the button goes, and the newest message it brought takes the focus.
    earlier.send_keys(Keys.ENTER)
    _wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, '[data-action="load-earlier"]'))
    assert browser.switch_to.active_element.get_attribute("id") == f"m-{browser.execute_script(SHOWN)[49]}"
    assert _said(browser) == "50 earlier messages loaded: this is the start of the chat."
