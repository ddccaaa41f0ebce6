"""The chat's dashboard on a phone, in headless Chromium: what its charts write stays inside them."""

from __future__ import annotations

import pytest

from tests.dashboard.factories import make_conversation, make_message, make_record
from tests.dashboard.test_browser import _login, _wait_ready
from tests.support.browser import browser, console_errors

__all__ = ["browser"]

pytestmark = [pytest.mark.browser]

# Every text of the charts' drawings that runs past its drawing's edges: [chart, text, left, right, width].
OUTSIDE = """
const out = [];
for (const svg of document.querySelectorAll('#dash svg')) {
  const width = svg.viewBox.baseVal.width;
  for (const text of svg.querySelectorAll('text')) {
    const box = text.getBBox();
    if (box.width && (box.x < 0 || box.x + box.width > width)) {
      out.push([svg.parentElement.id, text.textContent, Math.round(box.x), Math.round(box.x + box.width), width]);
    }
  }
}
return out;
"""


def test_a_chart_with_nothing_saved_says_so_within_its_width_on_a_phone(live_server, transactional_db, browser,
                                                                         user):
    """"Nothing saved in these turns: everything fit under the trigger." ran past a phone's chart and
    was cut at "…under the trigg"."""
    conversation = make_conversation(owner=user, title="Short")
    for turn in range(1, 4):
        make_message(conversation=conversation, content=f"question {turn}")
        make_message(conversation=conversation, role="assistant", content=f"answer {turn}")
        make_record(conversation=conversation, tokens_full=100 * turn, tokens_sent=100 * turn)
    _login(browser, live_server, user)
    browser.set_window_size(360, 740)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)
    note = browser.execute_script(
        "return [...document.querySelectorAll('#chart-strategy text')].map((t) => t.textContent).join(' ')")
    assert "Nothing saved in these turns:" in note and "everything fit under the trigger." in note

    assert browser.execute_script(OUTSIDE) == []
    assert console_errors(browser) == []
