"""A click on a chat's row in the sidebar opens the chat wherever it lands on its title: the fade
before the row's buttons (shown while the pointer is on the row) took the clicks on the title's end,
"…" and the blank just before them included, and nothing happened."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up, _wait
from tests.ui.test_browser_sidebar_rename import _chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_click_just_before_a_rows_buttons_opens_its_chat(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "row-click")
    chat = _chat("row-click", "A title long enough to run under the row's buttons")
    browser.get(f"{asgi_server.url}/")
    row = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{chat.pk}"]'))
    ActionChains(browser).move_to_element(row).perform()  # the pointer on the row: its buttons show
    first = row.find_element(By.CSS_SELECTOR, '[data-action="pin-conversation"]')
    _wait(browser, lambda d: first.is_displayed())
    # a few pixels left of the Pin button, still on the row's title line
    left_of_pin = first.rect["x"] - 6 - (row.rect["x"] + row.rect["width"] / 2)
    ActionChains(browser).move_to_element_with_offset(row, int(left_of_pin), 0).click().perform()
    _wait(browser, lambda d: d.current_url.endswith(f"/c/{chat.pk}/"), timeout=10)
    assert console_errors(browser) == []
