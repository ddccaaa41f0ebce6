"""A message's "⋯" menu opens whole inside the timeline, also under the last reply of a long chat."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation
from tests.support.browser import console_errors
from tests.support.chat import seed_messages
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# How far the open menu reaches past the timeline's visible bottom edge (≤ 0: all of it is seen).
MENU_OVERHANG = """
const timeline = document.querySelector('.timeline');
const menu = document.querySelector('.msg .menu:not([hidden])');
return menu.getBoundingClientRect().bottom - timeline.getBoundingClientRect().bottom;
"""


def test_the_last_replys_menu_is_not_cut_off_by_the_timelines_bottom(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "menu-fit")
    conversation = Conversation.objects.create(owner=get_user_model().objects.get(username="menu-fit"),
                                               title="Long")
    seed_messages(conversation, 12, words=80)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    more = browser.find_elements(By.CSS_SELECTOR, '.msg--assistant [data-action="message-menu"]')[-1]
    _wait(browser, lambda d: more.is_displayed())
    more.click()

    # its bottom edge (the lower part of "Pin") was under the composer: about 6px of it
    _wait(browser, lambda d: d.execute_script(MENU_OVERHANG) <= 0.5)
    assert browser.switch_to.active_element.get_attribute("role") == "menuitem"
    assert console_errors(browser) == []
