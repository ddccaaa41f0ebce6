""""What the model saw" shows each message sent cut to 7.5 lines, with "Show all" where the rest is cut:
the button was offered by the text's length (400 characters or more), not by what was cut, so a message
of short lines (a list, a log: 12 lines, 100 characters) or 300 characters on a phone, at 200% zoom or
with wider text spacing lost its end, with no way to show it."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.dashboard.factories import make_conversation, make_message, make_record, sent_entry
from tests.dashboard.test_browser import _login, _wait_ready
from tests.support.browser import browser, console_errors
from tests.ui.test_browser import _wait

__all__ = ["browser"]

pytestmark = [pytest.mark.browser]

# Each message's body sent in the turn shown: [its text, whether it is cut, whether its Show all shows].
BODIES = """return [...document.querySelectorAll('#sent-list .dash-sent-body')].map((b) => [
  b.textContent.slice(0, 12), b.scrollHeight > b.clientHeight + 1, !b.nextElementSibling.hidden]);"""


@pytest.mark.parametrize("width", [1366, 390])
def test_show_all_is_offered_wherever_the_text_is_cut(live_server, transactional_db, browser, user, width):
    conversation = make_conversation(owner=user, title="Folds")
    lines = make_message(conversation=conversation, content="\n".join(f"step {n}" for n in range(1, 13)))
    words = make_message(conversation=conversation, role="assistant", content="A sentence of some words. " * 12)
    short = make_message(conversation=conversation, content="Thanks.")
    make_record(conversation=conversation, tokens_full=300, tokens_sent=300,
                sent=[sent_entry("verbatim", m) for m in (lines, words, short)])
    _login(browser, live_server, user)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})
    try:
        browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
        _wait_ready(browser)
        _wait(browser, lambda d: len(d.execute_script(BODIES)) == 3)
        bodies = browser.execute_script(BODIES)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert bodies[0][1] and not bodies[2][1]  # the list is cut, "Thanks." is not
    assert [shown for _, _, shown in bodies] == [cut for _, cut, _ in bodies], bodies
    more = browser.find_elements(By.CSS_SELECTOR, "#sent-list .dash-more")[0]
    more.click()
    _wait(browser, lambda d: not d.execute_script(BODIES)[0][1])
    assert more.text == "Show less"
    assert console_errors(browser) == []
