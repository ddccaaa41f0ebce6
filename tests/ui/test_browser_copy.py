"""Copy buttons heard as well as seen: a code block's Copy, whose label stays "Copy code" for a screen
reader while the button shows "Copied", says in the page's live region whether it copied."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _wait
from tests.ui.test_browser_focus_kept import open_code_chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _said(browser) -> str:
    return browser.find_element(By.ID, "stream-status").get_attribute("textContent")


def test_copying_a_code_block_is_announced(asgi_server, browser):
    open_code_chat(browser, asgi_server.url, "copy-heard")
    copy_code = browser.find_element(By.CSS_SELECTOR, '[data-action="copy-code"]')
    browser.execute_script("arguments[0].focus()", copy_code)
    ActionChains(browser).send_keys(Keys.ENTER).perform()

    _wait(browser, lambda d: copy_code.text in {"Copied", "Copy failed"})
    expected = "Code copied to the clipboard." if copy_code.text == "Copied" else "Could not copy the code."
    _wait(browser, lambda d: _said(d) == expected)  # it said nothing: only the button's text changed
    assert console_errors(browser) == []
