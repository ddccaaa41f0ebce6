"""A long chat read from its end upwards in headless Chromium: "Load earlier messages" puts the older
page above what was read, which stays where it was on the screen, and a link to a message deep in
the history (a search hit, a pinned message) opens it however many pages above it lie."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation
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
