"""The timeline in a real browser marks messages by the place the server computed with the core's
layout rule (optimizer.layout.message_place), after the page script has re-placed the window."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from chatapp.chat.models import Message
from tests.support.browser import console_errors
from tests.support.layout import expected_places, make_layout_conversation
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _outside(browser) -> set[int]:
    return {int(e.get_attribute("data-id")) for e in browser.find_elements(By.CSS_SELECTOR, ".msg.is-outside")}


def test_outside_marks_follow_the_core_places_and_a_pin(asgi_server, browser, fake_openai):
    base = asgi_server.url
    user, _ = _sign_up_with_model(browser, base, "browser-layout", fake_url=fake_openai.base_url, model="fake-echo",
                                  name="Echo 16k")
    layout = make_layout_conversation(owner=user)
    places = expected_places(layout)
    evicted = {pk for pk, place in places.items() if place == "evicted"}
    browser.get(f"{base}/c/{layout.conversation.pk}/")
    # the gauge has answered and the script has placed the window marker itself
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".window-marker"))
    assert _outside(browser) == evicted

    # pinning an evicted message moves it to the static layer at once, as the pin answer says
    target = next(m for m in layout.messages if m.pk in evicted and m.role == "assistant")
    item = browser.find_element(By.ID, f"m-{target.pk}")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", item)
    item.find_element(By.CSS_SELECTOR, '[data-action="message-menu"]').click()
    item.find_element(By.CSS_SELECTOR, '[data-action="toggle-pin"]').click()
    _wait(browser, lambda d: item.get_attribute("data-place") == "static")
    _wait(browser, lambda d: _outside(d) == evicted - {target.pk})
    assert Message.objects.get(pk=target.pk).pinned

    # unpinned again, it is older than the window: the toast says how it can still reach the model
    item.find_element(By.CSS_SELECTOR, '[data-action="message-menu"]').click()
    item.find_element(By.CSS_SELECTOR, '[data-action="toggle-pin"]').click()
    _wait(browser, lambda d: item.get_attribute("data-place") == "evicted")
    toast = _wait(browser, lambda d: [t for t in d.find_elements(By.CSS_SELECTOR, "#toasts .toast")
                                      if t.text.startswith("Unpinned")])[0]
    assert "only when recall quotes it" in toast.text
    assert console_errors(browser) == []
