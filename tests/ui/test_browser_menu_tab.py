"""Tab out of an open "more" menu or the gauge's popover: it closes, as a menu's role promises,
instead of staying open over the controls the focus goes on to."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _send, _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _open_from_the_keyboard(browser, button) -> None:
    browser.execute_script("arguments[0].focus()", button)
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _wait(browser, lambda d: button.get_attribute("aria-expanded") == "true")


def _open_menus(browser) -> list:
    return [m for m in browser.find_elements(By.CSS_SELECTOR, ".menu, .gauge-pop") if m.is_displayed()]


def test_tab_out_of_a_menu_closes_it(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "menu-tab-user")
    _send(browser, "A chat with menus.")
    chat_menu = browser.find_element(By.ID, "conv-menu-btn")
    _open_from_the_keyboard(browser, chat_menu)
    items = [i for i in browser.find_elements(By.CSS_SELECTOR, "#conv-menu-btn + .menu [role='menuitem']")
             if i.is_displayed()]
    ActionChains(browser).send_keys(Keys.END, Keys.TAB).perform()  # from its last item, on to the page

    _wait(browser, lambda d: not _open_menus(d))  # it stayed open over the first message's buttons
    assert chat_menu.get_attribute("aria-expanded") == "false"
    assert browser.switch_to.active_element not in [*items, chat_menu]

    # Shift+Tab out of a message's menu (past its button, which keeps it open), and out of the gauge's
    # popover, the same.
    message_menu = browser.find_elements(By.CSS_SELECTOR, '.msg--assistant [data-action="message-menu"]')[-1]
    _open_from_the_keyboard(browser, message_menu)
    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
    assert browser.switch_to.active_element == message_menu and _open_menus(browser)
    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
    _wait(browser, lambda d: not _open_menus(d))
    assert message_menu.get_attribute("aria-expanded") == "false"
    gauge = browser.find_element(By.ID, "gauge")
    _open_from_the_keyboard(browser, gauge)
    assert _open_menus(browser)
    browser.execute_script("document.getElementById('composer-input').focus()")
    _wait(browser, lambda d: not _open_menus(d))
    assert gauge.get_attribute("aria-expanded") == "false"
    assert console_errors(browser) == []
