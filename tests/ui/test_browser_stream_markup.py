"""A streaming reply is drawn as Markdown while it streams, not only once complete (markup events,
static/js/chat/progressive.js): its bold and its list appear while it is still being written, and the
words after the last drawing go on at the end of its last block."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reply_is_drawn_as_markdown_while_it_streams(asgi_server, browser, fake_openai):
    # Some thirty chunks 80 ms apart: the echo of the question below, bold and all.
    _sign_up_with_model(browser, asgi_server.url, "markup-live", fake_url=fake_openai.base_url, model="slow-80",
                        name="Slow")
    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys("Please write **bold words** and then many more plain words for the rest", Keys.ENTER)

    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant"))[-1]
    strong = _wait(browser, lambda d: reply.find_elements(By.CSS_SELECTOR, ".msg-content strong"))
    # drawn before the end
    assert "is-streaming" in browser.find_element(By.ID, "app").get_attribute("class")
    assert reply.get_attribute("data-status") is None
    assert strong[0].text == "bold words"
    content = reply.find_element(By.CSS_SELECTOR, ".msg-content")
    assert "is-plain" not in content.get_attribute("class")

    _wait(browser, lambda d: reply.get_attribute("data-status") == "complete")
    assert content.find_element(By.CSS_SELECTOR, "strong").text == "bold words"
    assert content.text.endswith("plain words for the rest")
    assert console_errors(browser) == []
