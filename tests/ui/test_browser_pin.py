"""Pinning a chat to the top of the sidebar in a real browser, from the keyboard: the chat moves to a
"Pinned" section and back, and the focus stays on its pin button, which says what it now does."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up, _wait
from tests.ui.test_browser_sidebar_rename import _chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _sections(driver) -> list[tuple[str, list[str]]]:
    return [
        (group.find_element(By.CSS_SELECTOR, ".conv-group-label").text,
         [t.text for t in group.find_elements(By.CSS_SELECTOR, ".conv-title")])
        for group in driver.find_elements(By.CSS_SELECTOR, "#conv-nav .conv-group")
    ]


def _press_pin(driver, conversation) -> None:
    row = driver.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{conversation.pk}"]')
    # A keyboard user's way: the row's link, then its Pin button (shown while the row holds the focus).
    for css in (".conv-link", '[data-action="pin-conversation"]'):
        driver.execute_script("arguments[0].focus()", row.find_element(By.CSS_SELECTOR, css))
    ActionChains(driver).send_keys(Keys.ENTER).perform()


def test_a_chat_pinned_from_the_keyboard_moves_to_the_top_and_back(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "pin-keys")
    trip = _chat("pin-keys", "Lisbon trip")
    _chat("pin-keys", "Groceries")
    browser.get(f"{asgi_server.url}/c/new/")
    assert _sections(browser) == [("Today", ["Groceries", "Lisbon trip"])]

    _press_pin(browser, trip)

    _wait(browser, lambda d: _sections(d) == [("Pinned", ["Lisbon trip"]), ("Today", ["Groceries"])])
    focused = browser.switch_to.active_element
    assert focused.get_attribute("aria-label") == "Unpin “Lisbon trip”"
    assert focused.find_element(By.XPATH, "ancestor::li").get_attribute("data-id") == str(trip.pk)
    status = browser.find_element(By.ID, "stream-status")
    _wait(browser, lambda d: status.get_attribute("textContent") == "Chat pinned to the top of the list.")

    browser.refresh()  # kept on the server
    _wait(browser, lambda d: _sections(d) == [("Pinned", ["Lisbon trip"]), ("Today", ["Groceries"])])
    _press_pin(browser, trip)

    _wait(browser, lambda d: _sections(d) == [("Today", ["Groceries", "Lisbon trip"])])
    assert browser.switch_to.active_element.get_attribute("aria-label") == "Pin “Lisbon trip”"
    assert console_errors(browser) == []


# How far a row's title (its "…" included) runs under the row's first button, in CSS pixels.
TITLE_UNDER_BUTTONS = """
const row = arguments[0];
const title = row.querySelector('.conv-title').getBoundingClientRect();
return title.right - row.querySelector('.conv-actions button').getBoundingClientRect().left;
"""


def test_a_long_title_ends_before_its_rows_buttons(asgi_server, browser):
    """Beside the Pin, Rename and Delete buttons a long title was cut mid-letter under the Pin, its "…"
    hidden: on a phone (the buttons always shown, 70px left them for two) and where a row held the
    keyboard's focus (the room was made on hover only)."""
    _sign_up(browser, asgi_server.url, "pin-long-title")
    long_one = _chat("pin-long-title", "Planning the whole family's summer holiday in the Dolomites and Lisbon")
    _chat("pin-long-title", "Short")  # the chat opened below: the long one is not the current row
    browser.set_window_size(390, 844)
    browser.get(asgi_server.url + "/")
    browser.find_element(By.CSS_SELECTOR, ".sidebar-toggle").click()
    row = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{long_one.pk}"]'))
    _wait(browser, lambda d: row.find_element(By.CSS_SELECTOR, ".conv-actions button").is_displayed())
    assert browser.execute_script(TITLE_UNDER_BUTTONS, row) <= 0

    browser.set_window_size(1366, 900)
    row = browser.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{long_one.pk}"]')
    browser.execute_script("arguments[0].focus()", row.find_element(By.CSS_SELECTOR, ".conv-link"))
    _wait(browser, lambda d: row.find_element(By.CSS_SELECTOR, ".conv-actions button").is_displayed())
    assert browser.execute_script(TITLE_UNDER_BUTTONS, row) <= 0
    assert console_errors(browser) == []
