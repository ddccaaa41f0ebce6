"""A jump to a message far up (a link, a search hit) while the page's own reply streams, in headless
Chromium (window.js): the run around the message replaced the one shown, the reply being written
with it, and the jump button back at the end brought the server's copy of it, stuck at "Writing…"
(the page's own stream wrote on into the node taken off). The live reply is kept and put back at
the chat's end, and the jump button says meanwhile that a reply is being written."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Conversation
from tests.support.browser import console_errors
from tests.support.chat import seed_messages
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STREAMING = "return document.querySelector('#messages > .msg.is-streaming[data-id]')"


def _sent_then_far_up(browser, base, fake_openai, username, model, text):
    """A chat of 300 messages with `model`, `text` sent, and while its reply streams (returned, with its
    id: off the page then, the node reads as stale) a link to its 11th message followed: far up."""
    user, config = _sign_up_with_model(browser, base, username, fake_url=fake_openai.base_url, model=model,
                                       name="Slow")
    conversation = Conversation.objects.create(owner=user, title="Long", llm_config=config)
    ids = seed_messages(conversation, 300, words=4)
    browser.get(f"{base}/c/{conversation.pk}/")
    box = _wait(browser, lambda d: d.find_element(By.ID, "composer-input"))
    box.send_keys(text, Keys.ENTER)
    reply = _wait(browser, lambda d: (r := d.execute_script(STREAMING))
                  and r.find_element(By.CSS_SELECTOR, ".msg-content").text and r)
    reply_id = reply.get_attribute("id")
    browser.execute_script("location.hash = arguments[0]", f"#m-{ids[10]}")
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == f"m-{ids[10]}")
    assert not browser.find_elements(By.ID, reply_id)  # the chat's end is pages below
    return reply, reply_id


@pytest.mark.parametrize("way_back", ["jump", "load-newer"])
def test_a_jump_far_up_while_the_reply_streams_keeps_it_streaming_for_the_way_back(
    asgi_server, browser, fake_openai, way_back
):
    words = "Please echo all of these words back to me slowly one by one until the very end"
    reply, reply_id = _sent_then_far_up(browser, asgi_server.url, fake_openai, f"midstream-{way_back}", "slow-250",
                                        words)
    jump = browser.find_element(By.ID, "jump-btn")
    assert jump.is_displayed()
    assert "is-writing" in jump.get_attribute("class")
    assert jump.get_attribute("aria-label") == "Scroll to the newest message: a reply is being written"

    if way_back == "jump":
        jump.click()
    else:  # read down page by page: the page that reaches the chat's end puts the live reply back
        while browser.find_elements(By.CSS_SELECTOR, '[data-action="load-newer"]:not([disabled])'):
            newer = browser.find_element(By.CSS_SELECTOR, '[data-action="load-newer"]')
            browser.execute_script("arguments[0].click()", newer)
            _wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, '[data-action="load-newer"][disabled]'))
    # The live reply, still being written, in its place at the end: not a copy of it stuck at "Writing…".
    _wait(browser, lambda d: d.find_elements(By.ID, reply_id))
    assert browser.execute_script(STREAMING) == reply
    assert len(browser.find_elements(By.ID, reply_id)) == 1
    assert browser.find_elements(By.CSS_SELECTOR, "#messages > .msg")[-1] == reply
    assert "is-writing" not in jump.get_attribute("class")
    _wait(browser, lambda d: reply.get_attribute("data-status") == "complete")
    assert "until the very end" in reply.find_element(By.CSS_SELECTOR, ".msg-content").text
    assert jump.get_attribute("aria-label") == "Scroll to the newest message"
    assert console_errors(browser) == []


def test_a_reply_that_ends_while_far_up_is_shown_as_stored_on_the_way_back(asgi_server, browser, fake_openai):
    _, reply_id = _sent_then_far_up(browser, asgi_server.url, fake_openai, "jump-ended", "slow-100",
                                    "Echo these few words back")
    jump = browser.find_element(By.ID, "jump-btn")
    _wait(browser, lambda d: jump.is_displayed() and "is-writing" not in jump.get_attribute("class")
          and d.find_element(By.ID, "stream-status").get_attribute("textContent") == "Reply complete.")
    jump.click()
    reply = _wait(browser, lambda d: d.find_element(By.ID, reply_id))
    assert reply.get_attribute("data-status") == "complete"
    assert "few words back" in reply.find_element(By.CSS_SELECTOR, ".msg-content").text
    assert browser.find_elements(By.CSS_SELECTOR, "#messages > .msg")[-1] == reply
    assert console_errors(browser) == []
