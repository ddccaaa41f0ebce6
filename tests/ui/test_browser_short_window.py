"""A short window (a 1280x720 laptop at 200% zoom is 640x360 CSS pixels; a phone turned): the chats
drawer shows the chats, scrolling as a whole, where its head and foot left the list a 10px sliver."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_chats_drawer_of_a_short_window_shows_its_chats(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "short-window")
    owner = get_user_model().objects.get(username="short-window")
    chats = [Conversation.objects.create(owner=owner, title=f"Chat number {i}") for i in range(10)]
    browser.set_window_size(640, 360 + browser.execute_script("return window.outerHeight - window.innerHeight"))
    browser.get(f"{asgi_server.url}/c/{chats[0].pk}/")
    browser.find_element(By.CSS_SELECTOR, ".sidebar-toggle").click()
    _wait(browser, lambda d: "sidebar-open" in d.find_element(By.ID, "app").get_attribute("class"))

    nav = browser.find_element(By.CSS_SELECTOR, ".conv-nav")
    assert nav.rect["height"] > 200  # the chats have room: the drawer scrolls, not the list in a sliver
    last = browser.find_elements(By.CSS_SELECTOR, ".conv-item")[-1]
    # Scrolled to once the drawer has come in (it slides; a scroll asked meanwhile may land short).
    in_view = ("arguments[0].scrollIntoView({block: 'end', behavior: 'instant'});"
               "const r = arguments[0].getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight + 1")
    _wait(browser, lambda d: d.execute_script(in_view, last))
