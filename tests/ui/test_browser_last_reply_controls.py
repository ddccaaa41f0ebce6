"""Regenerate belongs to the chat's newest reply: once a new message is sent, the reply before it loses
it at once, not when the new reply ends (pressed meanwhile, it only said a reply was being written, and
would regenerate a reply that is no longer the last); a send refused gives it back."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _idle, _send, _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _regenerate_shown(reply) -> bool:
    return any(b.is_displayed() for b in reply.find_elements(By.CSS_SELECTOR, '[data-action="regenerate"]'))


def test_the_previous_reply_loses_regenerate_as_a_new_message_is_sent(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "last-reply", fake_url=fake_openai.base_url, model="slow-300",
                        name="Slow")
    browser.get(f"{asgi_server.url}/")
    first = _send(browser, "Where do we sleep in Lisbon?")
    first_id = first.get_attribute("id")
    assert _regenerate_shown(first)

    browser.find_element(By.ID, "composer-input").send_keys("And in Porto?", Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming"))
    assert not _regenerate_shown(browser.find_element(By.ID, first_id))
    assert "is-last" not in browser.find_element(By.ID, first_id).get_attribute("class")

    _wait(browser, _idle)
    newest = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1]
    assert _regenerate_shown(newest)
    assert not _regenerate_shown(browser.find_element(By.ID, first_id))
    assert console_errors(browser) == []


def test_a_send_refused_gives_the_previous_reply_its_regenerate_back(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "last-reply-refused", fake_url=fake_openai.base_url,
                        model="fake-echo", name="Echo")
    browser.get(f"{asgi_server.url}/")
    first = _send(browser, "Where do we sleep in Lisbon?")
    first_id = first.get_attribute("id")
    # the chat deleted meanwhile (another device): the next send is refused, nothing stored
    browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(`/api/conversations/${document.getElementById('app').dataset.conversationId}/`,"
        " {method: 'DELETE', headers: {'X-CSRFToken': Longchat.csrfToken()}}).then(() => done());"
    )
    browser.find_element(By.ID, "composer-input").send_keys("And in Porto?", Keys.ENTER)
    _wait(browser, lambda d: "no longer exists" in d.find_element(By.ID, "composer-error").text)
    assert _regenerate_shown(browser.find_element(By.ID, first_id))
    assert "is-last" in browser.find_element(By.ID, first_id).get_attribute("class")
