"""On a phone, whose on-screen keyboard has no Shift+Enter, Enter adds a line and the send button sends
(as in ChatGPT and Open WebUI): Enter sent the message, so a message of two lines could not be written."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_enter_on_a_touch_screen_adds_a_line(asgi_server, browser, fake_openai):
    browser.set_window_size(390, 844)
    # A touch screen and nothing else (Chromium then matches `pointer: coarse`, not `any-pointer: fine`).
    browser.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 5})
    _sign_up_with_model(browser, asgi_server.url, "touch-enter", fake_url=fake_openai.base_url, model="fake-echo",
                        name="Echo")
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("First line", Keys.ENTER, "second line")
    assert box.get_attribute("value") == "First line\nsecond line"
    assert browser.find_elements(By.CSS_SELECTOR, ".msg--user") == []

    browser.find_element(By.ID, "send-btn").click()
    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant[data-status='complete']"))[0]
    assert "Last user message: First line second line" in reply.text
    mine = browser.find_element(By.CSS_SELECTOR, ".msg--user")
    assert mine.find_element(By.CSS_SELECTOR, ".msg-source").get_attribute("value") == "First line\nsecond line"

    # Editing a message in place: the same.
    mine.find_element(By.CSS_SELECTOR, '[data-action="edit-message"]').click()
    area = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    area.send_keys(Keys.ENTER, "third line")
    assert area.get_attribute("value") == "First line\nsecond line\nthird line"
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")) == 1
    assert console_errors(browser) == []
