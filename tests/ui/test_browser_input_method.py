"""Typing with an input method (a Japanese or Chinese IME): its Enter picks the characters and its Esc
drops a composition; neither is the page's key while the composition runs (keydown isComposing, or
keyCode 229 in Safari, whose Enter comes after compositionend)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Conversation, Message
from tests.ui.test_browser import _idle, _sign_up, _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

_COMPOSING_KEY = (
    "arguments[0].dispatchEvent(new KeyboardEvent('keydown', {key: arguments[1], isComposing: true,"
    " keyCode: 229, bubbles: true, cancelable: true}));"
)


def test_an_input_methods_esc_in_a_message_being_edited_keeps_the_edit(asgi_server, browser):
    # The Esc that drops a composition closed the edit-in-place box, and what was typed in it was lost.
    _sign_up(browser, asgi_server.url, "ime-edit")
    chat = Conversation.objects.create(owner=get_user_model().objects.get(username="ime-edit"), title="Trip")
    Message.objects.create(conversation=chat, role="user", content="Where do we sleep?")
    browser.get(f"{asgi_server.url}/c/{chat.pk}/")
    mine = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--user"))[0]
    mine.find_element(By.CSS_SELECTOR, '[data-action="edit-message"]').click()
    area = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    area.send_keys(" 東京")

    browser.execute_script(_COMPOSING_KEY, area, "Escape")

    assert browser.find_elements(By.CSS_SELECTOR, ".msg-edit-input") == [area]
    assert area.get_attribute("value") == "Where do we sleep? 東京"


def test_an_input_methods_esc_in_the_message_box_does_not_stop_the_reply(asgi_server, browser, fake_openai):
    # Typing the next message while a reply is written, the Esc that drops a composition stopped the reply.
    _sign_up_with_model(browser, asgi_server.url, "ime-stop", fake_url=fake_openai.base_url, model="slow-150",
                        name="Slow")
    browser.refresh()
    box = _wait(browser, lambda d: d.find_element(By.ID, "composer-input"))
    box.send_keys("Tell me about Tokyo", Keys.ENTER)
    _wait(browser, lambda d: not _idle(d))
    box.send_keys("東京")

    browser.execute_script(_COMPOSING_KEY, box, "Escape")

    reply = browser.find_element(By.CSS_SELECTOR, ".msg--assistant")
    _wait(browser, lambda d: reply.get_attribute("data-status") in ("complete", "stopped"))
    assert reply.get_attribute("data-status") == "complete"
    assert box.get_attribute("value") == "東京"
