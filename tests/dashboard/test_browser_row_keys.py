"""The turn list's rows, reached with Tab, show their turn on Enter or Space, as the buttons they act as."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.dashboard.factories import make_conversation, make_record
from tests.dashboard.test_browser import _login, _wait_ready
from tests.support.browser import browser, console_errors
from tests.ui.test_browser import _wait

__all__ = ["browser"]

pytestmark = [pytest.mark.browser]


def test_space_on_a_turn_row_shows_that_turn(live_server, transactional_db, browser, user):
    conversation = make_conversation(owner=user, title="Rows")
    for full in (1000, 1500, 2000):
        make_record(conversation=conversation, tokens_full=full, tokens_sent=full)
    _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)
    row = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, '#records-table tr[data-turn="1"]'))
    browser.execute_script("arguments[0].focus()", row)
    at = browser.execute_script("return window.scrollY")
    row.send_keys(Keys.SPACE)

    # Space scrolled the page down a screen, and the turn view stayed on the latest turn
    _wait(browser, lambda d: d.find_element(By.ID, "turn-input").get_attribute("value") == "1", timeout=5)
    assert browser.execute_script("return window.scrollY") == at
    assert console_errors(browser) == []
