""""What the model saw" in headless Chromium, as a screen reader hears it: a turn picked is said in one
sentence, not by reading out every message that turn sent."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.dashboard.factories import make_conversation, make_message, make_record, sent_entry
from tests.dashboard.test_browser import _login, _wait_ready
from tests.support.browser import HEAR_LIVE_REGIONS, browser, console_errors
from tests.ui.test_browser import _wait

__all__ = ["browser"]

pytestmark = [pytest.mark.browser]


def test_stepping_to_a_turn_says_it_in_a_sentence(live_server, transactional_db, browser, user):
    """The turn's whole view was a live region: each step (and the page's load) read out every message
    the turn sent, each in full."""
    conversation = make_conversation(owner=user, title="Heard")
    chat = []
    for turn in range(1, 4):
        chat.append(make_message(conversation=conversation, content=f"question {turn} " + "words " * 60))
        make_record(conversation=conversation, tokens_full=100 * turn, tokens_sent=100 * turn,
                    sent=[sent_entry("verbatim", m) for m in chat])
        chat.append(make_message(conversation=conversation, role="assistant", content=f"answer {turn}"))
    _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)
    latest = browser.find_element(By.ID, "sent-list").get_attribute("data-record")
    browser.execute_script(HEAR_LIVE_REGIONS)
    browser.find_element(By.CSS_SELECTOR, "[data-turn=prev]").click()

    _wait(browser, lambda d: d.find_element(By.ID, "sent-list").get_attribute("data-record") != latest)
    assert "turn-view" not in browser.execute_script("return window.__heard")
    said = browser.find_element(By.ID, "turn-status")
    _wait(browser, lambda d: said.get_attribute("textContent") == "Turn 2 of 3: 3 messages sent, 200 tokens.")
    assert console_errors(browser) == []
