"""On a phone the empty message box is one line high, whatever the name of the model in its placeholder."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_NAME = "accounts/fireworks/models/llama-v3p1-405b-instruct"


def test_an_empty_message_box_on_a_phone_is_one_line_high(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "placeholder-phone", fake_url=fake_openai.base_url,
                        model=LONG_NAME, name=LONG_NAME)
    browser.set_window_size(375, 800)
    browser.get(asgi_server.url + "/c/new/")
    box = _wait(browser, lambda d: d.find_element(By.ID, "composer-input"))
    assert LONG_NAME in box.get_attribute("placeholder")
    one_line = browser.execute_script(
        "const s = getComputedStyle(arguments[0]);"
        "return Math.max(parseFloat(s.minHeight),"
        "               parseFloat(s.lineHeight) + parseFloat(s.paddingTop) + parseFloat(s.paddingBottom));", box)

    # the placeholder's words wrapped, and the box grew to four lines of the phone's screen, empty
    assert box.size["height"] <= one_line + 1, (box.size["height"], one_line)
    box.send_keys("a" * 120)  # a draft as long still grows the box
    _wait(browser, lambda d: box.size["height"] > 2 * one_line)
    assert console_errors(browser) == []
