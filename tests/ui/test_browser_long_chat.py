"""A long chat read from its end upwards in headless Chromium: "Load earlier messages" puts the older
page above what was read, which stays where it was on the screen, and a link to a message deep in
the history (a search hit, a pinned message) opens it however many pages above it lie (the run kept
bounded as it is read further: test_browser_dom_window.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation, Message
from tests.support.browser import console_errors
from tests.support.chat import seed_messages
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Run in the page before a click on "Load earlier messages": the place on the screen of the message
# that was the oldest shown, read as soon as the button is given back (the load's own task has ended,
# the next frame has not come), then at every frame for a while, in `window.__tops`.
WATCH_OLDEST = """
const oldest = document.querySelector('#messages > .msg[data-id]');
const button = document.querySelector('[data-action="load-earlier"]');
window.__tops = [oldest.getBoundingClientRect().top];
new MutationObserver((records, observer) => {
  if (button.disabled) return;
  observer.disconnect();
  let frames = 0;
  const read = () => {
    window.__tops.push(oldest.getBoundingClientRect().top);
    if ((frames += 1) < 30) requestAnimationFrame(read);
  };
  read();
}).observe(button, {attributes: true, attributeFilter: ["disabled"]});
"""


def test_load_earlier_keeps_what_was_read_in_place(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "long-reader")
    user = get_user_model().objects.get(username="long-reader")
    conversation = Conversation.objects.create(owner=user, title="Long read")
    seed_messages(conversation, 330, words=40)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    button = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, '[data-action="load-earlier"]'))

    # Scrolled up to the top, the reader presses the button.
    browser.execute_script("document.getElementById('timeline').scrollTo({top: 0, behavior: 'instant'})")
    browser.execute_script(WATCH_OLDEST)
    button.click()
    _wait(browser, lambda d: len(d.execute_script("return window.__tops")) >= 30)
    tops = browser.execute_script("return window.__tops")
    # The message read stays at its place at once and in every frame after: the view was not sent to
    # the top of the page just loaded, then scrolled back down through it (a smooth scroll of
    # thousands of pixels) to land off where it was.
    assert all(abs(top - tops[0]) < 2 for top in tops), tops
    assert console_errors(browser) == []


# Run in the page before a click on "Load earlier messages": every change of a class of a message
# already shown, counted in `window.__restyled` until the button is given back.
COUNT_RESTYLED = """
const shown = new Set(document.querySelectorAll('#messages > .msg[data-id]'));
const button = document.querySelector('[data-action="load-earlier"]');
window.__restyled = null;
let count = 0;
const classes = new MutationObserver((records) => {
  count += records.filter((r) => shown.has(r.target)).length;
});
classes.observe(document.getElementById('messages'), {attributes: true, attributeFilter: ['class'], subtree: true});
new MutationObserver((records, observer) => {
  if (button.isConnected && button.disabled) return;
  observer.disconnect();
  count += classes.takeRecords().filter((r) => shown.has(r.target)).length;
  classes.disconnect();
  window.__restyled = count;
}).observe(document.getElementById('timeline'), {attributes: true, attributeFilter: ['disabled'], childList: true,
  subtree: true});
"""


def test_load_earlier_leaves_the_messages_shown_unstyled_again(asgi_server, browser):
    # Messages before the window are marked as not sent verbatim. A page loaded above them used to
    # take the mark off every message shown and put it back, so each load restyled the whole
    # timeline: 12,000 messages in, a click on the button cost seconds of style and layout.
    _sign_up(browser, asgi_server.url, "long-window")
    user = get_user_model().objects.get(username="long-window")
    conversation = Conversation.objects.create(owner=user, title="Long window")
    ids = seed_messages(conversation, 260)
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[-10])
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    button = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, '[data-action="load-earlier"]'))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#messages > .msg.is-outside")) == 90

    for loaded in (200, 260):
        browser.execute_script(COUNT_RESTYLED)
        browser.execute_script("arguments[0].click()", button)
        _wait(browser, lambda d: d.execute_script("return window.__restyled") is not None)
        assert browser.execute_script("return window.__restyled") == 0
        assert len(browser.find_elements(By.CSS_SELECTOR, "#messages > .msg[data-id]")) == loaded
    # All 250 before the window but the first message, which is always sent.
    assert len(browser.find_elements(By.CSS_SELECTOR, "#messages > .msg.is-outside")) == 249
    assert console_errors(browser) == []


def test_a_link_to_a_message_far_up_opens_it(asgi_server, browser, monkeypatch):
    # The page shows the message a link names (a search hit, a pinned message) however far up it is. It
    # used to give up after 100 pages of 100: in a chat of 12,000 messages a hit among the first ones was
    # never shown after minutes of loading, and nothing said so; then it read every page up to it, all
    # kept in the tab. Now the page of the path around it is read (window.js). Small pages here stand in
    # for a long chat: 4 messages a page, 5 at most for any request (the server's own bound, 500).
    monkeypatch.setattr("chatapp.chat.views.TIMELINE_PAGE", 4)
    monkeypatch.setattr("chatapp.chat.selectors.MESSAGE_PAGE_MAX", 5)
    _sign_up(browser, asgi_server.url, "long-link")
    user = get_user_model().objects.get(username="long-link")
    conversation = Conversation.objects.create(owner=user, title="Long link")
    ids = seed_messages(conversation, 600, words=2)
    Message.objects.filter(pk=ids[1]).update(pinned=True)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/#m-{ids[1]}")

    target = _wait(browser, lambda d: d.find_elements(By.ID, f"m-{ids[1]}")
                   and d.execute_script("return location.hash") == "" and d.find_element(By.ID, f"m-{ids[1]}"), 120)
    assert browser.switch_to.active_element == target
    assert "is-pinned" in target.get_attribute("class").split()
    shown = browser.execute_script(
        "return [...document.querySelectorAll('#messages > .msg[data-id]')].map((m) => +m.dataset.id)")
    assert shown == ids[:6]  # the page ending at it and the page after it, in order, once
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-action="load-earlier"]')
    newer = browser.find_element(By.CSS_SELECTOR, '[data-action="load-newer"]')
    assert newer.get_attribute("data-after") == str(ids[5])
    assert console_errors(browser) == []
