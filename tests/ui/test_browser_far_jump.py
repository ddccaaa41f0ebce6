"""A jump to a message far from the one in view lands at once in headless Chromium (window.js
bringIntoView): a link to a message (a search hit, #m-<id>) and the summary banner's "Show it" slid
smoothly through the whole run shown, hundreds of messages going past, to get there. A near one may
stay smooth, unless the user asked for reduced motion, which "Show it" did not heed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation, Message, SummaryJob
from tests.support.browser import console_errors
from tests.support.chat import seed_messages
from tests.ui.test_browser import _sign_up, _wait
from tests.ui.test_browser_dom_window import _chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Where a message is against the timeline's view, read in the same task as what scrolled to it: a
# smooth scroll has not moved yet then, one at once has ended.
IN_VIEW = """
const t = document.getElementById('timeline').getBoundingClientRect();
const r = arguments[0].getBoundingClientRect();
return r.bottom > t.top && r.top < t.bottom;
"""

# The message a link focuses, and whether it was in view as it took the focus (revealHash scrolls to it first).
SEEN_AT_FOCUS = """
window.__seen = null;
document.addEventListener('focusin', (e) => {
  if (!e.target.matches('#messages > .msg')) return;
  const t = document.getElementById('timeline').getBoundingClientRect();
  const r = e.target.getBoundingClientRect();
  window.__seen = [e.target.id, r.bottom > t.top && r.top < t.bottom];
}, true);
"""


def test_a_link_to_a_message_far_up_lands_at_once(asgi_server, browser):
    _, ids = _chat(browser, asgi_server.url, "far-link", 3000)
    # In the run shown, 90 messages up; then far beyond it, read in around the message (showAround).
    for target in (ids[-90], ids[40]):
        browser.execute_script(SEEN_AT_FOCUS)
        browser.execute_script("location.hash = arguments[0]", f"#m-{target}")
        _wait(browser, lambda d: d.execute_script("return window.__seen"))
        assert browser.execute_script("return window.__seen") == [f"m-{target}", True]
    assert console_errors(browser) == []


def _summary_shown(browser, base, username, count):
    """A chat of `count` messages whose summary of its first two just finished: the banner's "Show it"."""
    _sign_up(browser, base, username)
    conversation = Conversation.objects.create(owner=get_user_model().objects.get(username=username), title=username,
                                               offline=True)
    ids = seed_messages(conversation, count, words=30)
    summary = Message.objects.create(
        conversation=conversation, role="system", kind="summary", model="fake-echo",
        content="[Conversation summary — covers messages 1-2]\n\nThe first two.",
        covers_from_id=ids[0], covers_through_id=ids[1], covered_message_count=2,
    )
    now = timezone.now()
    SummaryJob.objects.create(conversation=conversation, status=SummaryJob.Status.DONE, summary=summary,
                              started_at=now - timedelta(seconds=2), finished_at=now)
    browser.get(f"{base}/c/{conversation.pk}/")
    show = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-action="show-summary"]'))[0]
    return browser.find_element(By.ID, f"m-{summary.pk}"), show


def test_show_it_for_a_summary_far_up_lands_at_once(asgi_server, browser):
    marker, show = _summary_shown(browser, asgi_server.url, "far-summary", 90)
    assert not browser.execute_script(IN_VIEW, marker)  # the page opens at the chat's end
    assert browser.execute_script(f"arguments[1].click(); {IN_VIEW}", marker, show)
    assert marker.get_attribute("open") is not None
    assert console_errors(browser) == []


def test_show_it_near_lands_at_once_with_reduced_motion(asgi_server, browser):
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                            {"features": [{"name": "prefers-reduced-motion", "value": "reduce"}]})
    try:
        marker, show = _summary_shown(browser, asgi_server.url, "near-summary", 90)
        # The marker just above the view: a near jump, smooth for others.
        browser.execute_script(
            "const t = document.getElementById('timeline');"
            "t.scrollTop += arguments[0].getBoundingClientRect().bottom - t.getBoundingClientRect().top + 40;",
            marker,
        )
        assert not browser.execute_script(IN_VIEW, marker)
        assert browser.execute_script(f"arguments[1].click(); {IN_VIEW}", marker, show)
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert console_errors(browser) == []
