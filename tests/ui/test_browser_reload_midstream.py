"""A page reloaded (or closed) while a reply streams: the server goes on writing the reply, the page
that comes back follows it to its end, and its Stop ends it there."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Message
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _send_then_reload(browser, text: str) -> int:
    """Send `text`, reload once the reply has begun: the reply's id."""
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys(text, Keys.ENTER)
    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming[data-id]"))[0]
    _wait(browser, lambda d: reply.find_element(By.CSS_SELECTOR, ".msg-content").text.strip())
    reply_id = int(reply.get_attribute("data-id"))
    browser.refresh()
    return reply_id


def _shown(browser, reply_id: int):
    return browser.find_element(By.ID, f"m-{reply_id}")


def test_a_reply_goes_on_after_a_reload_and_the_page_follows_it(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "reloader", fake_url=fake_openai.base_url, model="slow-150",
                        name="Slow")
    reply_id = _send_then_reload(browser, "Tell me something while I reload")
    assert _shown(browser, reply_id).get_attribute("data-status") == "streaming"
    _wait(browser, lambda d: _shown(d, reply_id).get_attribute("data-status") == "complete", timeout=30)
    stored = Message.objects.get(pk=reply_id)
    assert stored.status == "complete" and "Tell me something while I reload" in stored.content
    assert "while I reload" in _shown(browser, reply_id).find_element(By.CSS_SELECTOR, ".msg-content").text


def test_a_reply_followed_after_a_reload_stops_from_its_own_button(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "reload-stop", fake_url=fake_openai.base_url, model="slow-500",
                        name="Slower")
    reply_id = _send_then_reload(browser, "A long answer, please, that I will stop")
    _shown(browser, reply_id).find_element(By.CSS_SELECTOR, '[data-action="stop-reply"]').click()
    _wait(browser, lambda d: _shown(d, reply_id).get_attribute("data-status") == "stopped", timeout=30)
    _wait(browser, lambda d: Message.objects.get(pk=reply_id).token_count, timeout=10)
    stored = Message.objects.get(pk=reply_id)
    # Part of the echo: its end, the question repeated, never came.
    assert stored.status == "stopped" and stored.content.startswith("Echo:") and "I will stop" not in stored.content


def _said(browser) -> str:
    """What the page's live region last announced."""
    return browser.find_element(By.ID, "stream-status").get_attribute("textContent")


def test_a_followed_reply_holds_the_composer_as_the_pages_own_does(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "reload-esc", fake_url=fake_openai.base_url, model="slow-500",
                        name="Slower")
    reply_id = _send_then_reload(browser, "A long answer, please, that Esc will stop")
    _wait(browser, lambda d: d.find_element(By.ID, "stop-btn").is_displayed())
    assert not browser.find_element(By.ID, "send-btn").is_displayed()
    assert browser.find_element(By.ID, "composer-hint-busy").is_displayed()
    # Enter waits for the reply: nothing is sent yet (no 409 from the server), the text stays in the
    # box, and the hint says it goes when the reply ends.
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("my next question", Keys.ENTER)
    _wait(browser, lambda d: "sent when it ends" in _said(d))
    assert box.get_attribute("value") == "my next question"
    assert "sent when this reply is complete" in browser.find_element(By.ID, "composer-hint-busy").text
    assert Message.objects.filter(role="user").count() == 1
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg-error")
    # Regenerate waits too, and says so.
    _shown(browser, reply_id).find_element(By.CSS_SELECTOR, '[data-action="regenerate"]').click()
    _wait(browser, lambda d: any("still being written" in t.text for t in d.find_elements(By.CSS_SELECTOR, ".toast")))
    # Esc stops it, as it stops a reply the page started; the message waiting in the box stays there.
    box.send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: _shown(d, reply_id).get_attribute("data-status") == "stopped", timeout=30)
    _wait(browser, lambda d: d.find_element(By.ID, "send-btn").is_displayed(), timeout=10)
    assert not browser.find_element(By.ID, "stop-btn").is_displayed()
    assert Message.objects.get(pk=reply_id).status == "stopped"
    assert box.get_attribute("value") == "my next question"
    assert Message.objects.filter(role="user").count() == 1


def _connections_drop(asgi_server) -> None:
    """Close the server's side of every open connection (a proxy timing out, the network going)."""
    for protocol in list(asgi_server.server.server_state.connections):
        protocol.loop.call_soon_threadsafe(protocol.transport.close)


def test_a_reply_whose_connection_drops_is_followed_to_its_stored_end(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "dropped", fake_url=fake_openai.base_url, model="slow-150",
                        name="Slow")
    browser.refresh()
    box = _wait(browser, lambda d: d.find_elements(By.ID, "composer-input"))[0]
    box.send_keys("A table please, line by line", Keys.ENTER)
    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming[data-id]"))[0]
    _wait(browser, lambda d: reply.find_element(By.CSS_SELECTOR, ".msg-content").text.strip())
    reply_id = int(reply.get_attribute("data-id"))
    _connections_drop(asgi_server)
    # What arrived stays as it came, the page says the connection was lost and follows the reply...
    _wait(browser, lambda d: "connection to the server was lost" in _shown(d, reply_id).text)
    assert _shown(browser, reply_id).get_attribute("data-status") == "streaming"
    assert _shown(browser, reply_id).find_element(By.CSS_SELECTOR, ".msg-content").text.startswith("Echo:")
    # ...which the server wrote to its end without the client: shown as stored, with its model.
    _wait(browser, lambda d: _shown(d, reply_id).get_attribute("data-status") == "complete", timeout=30)
    shown = _shown(browser, reply_id)
    assert "line by line" in shown.find_element(By.CSS_SELECTOR, ".msg-content").text
    assert not shown.find_elements(By.CSS_SELECTOR, ".msg-error")
    assert shown.find_element(By.CSS_SELECTOR, ".msg-model").text == "slow-150"
    assert Message.objects.get(pk=reply_id).status == "complete"


def _sent_and_dropped(browser, asgi_server, text: str) -> int:
    """Send `text` and drop the connection once its reply has begun: the reply's id."""
    browser.find_element(By.ID, "composer-input").send_keys(text, Keys.ENTER)
    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming[data-id]"))[0]
    _wait(browser, lambda d: reply.find_element(By.CSS_SELECTOR, ".msg-content").text.strip())
    _connections_drop(asgi_server)
    return int(reply.get_attribute("data-id"))


def _followed_to_its_end(browser, reply_id: int) -> None:
    _wait(browser, lambda d: _shown(d, reply_id).get_attribute("data-status") == "complete", timeout=30)
    _wait(browser, lambda d: d.find_element(By.ID, "send-btn").is_displayed(), timeout=10)


def test_a_dropped_connection_long_after_the_first_is_followed_too(asgi_server, browser, fake_openai):
    """The follow's 15-minute bound counted from the page's first followed reply: a connection lost
    later than that was never followed, and the chat stayed 'Writing…' until a reload."""
    _sign_up_with_model(browser, asgi_server.url, "dropped-twice", fake_url=fake_openai.base_url,
                        model="slow-150", name="Slow")
    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.ID, "composer-input"))
    _followed_to_its_end(browser, _sent_and_dropped(browser, asgi_server, "First answer, line by line"))
    browser.execute_script("const real = Date.now; Date.now = () => real() + 16 * 60 * 1000;")  # 16 min pass
    _followed_to_its_end(browser, _sent_and_dropped(browser, asgi_server, "Second answer, line by line"))


def test_a_followed_reply_is_announced_when_it_ends(asgi_server, browser, fake_openai):
    """The page's live region said nothing when a reply it followed (after a reload, or a dropped
    connection) ended: a screen reader user never heard the reply was complete, or stopped."""
    _sign_up_with_model(browser, asgi_server.url, "reload-hear", fake_url=fake_openai.base_url, model="slow-150",
                        name="Slow")
    reply_id = _send_then_reload(browser, "Tell me something I will hear the end of")
    _wait(browser, lambda d: _shown(d, reply_id).get_attribute("data-status") == "complete", timeout=30)
    _wait(browser, lambda d: _said(d) == "Reply complete.")

    browser.find_element(By.ID, "composer-input").send_keys("And a second answer, that Esc stops", Keys.ENTER)
    second = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming[data-id]"))[0]
    second_id = int(second.get_attribute("data-id"))
    _wait(browser, lambda d: second.find_element(By.CSS_SELECTOR, ".msg-content").text.strip())
    _connections_drop(asgi_server)
    _wait(browser, lambda d: "connection to the server was lost" in _shown(d, second_id).text)
    browser.find_element(By.ID, "composer-input").send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: _shown(d, second_id).get_attribute("data-status") == "stopped", timeout=30)
    _wait(browser, lambda d: _said(d) == "Reply stopped.")


def test_a_followed_reply_stopped_from_the_keyboard_keeps_the_focus_off_the_page(asgi_server, browser, fake_openai):
    """The reply's own Stop, disabled once pressed, dropped the focus to the page (<body>), where it
    stayed after the reply ended."""
    _sign_up_with_model(browser, asgi_server.url, "reload-stop-keys", fake_url=fake_openai.base_url,
                        model="slow-500", name="Slower")
    reply_id = _send_then_reload(browser, "A long answer, please, that I will stop from the keyboard")
    stop = _shown(browser, reply_id).find_element(By.CSS_SELECTOR, '[data-action="stop-reply"]')
    browser.execute_script("arguments[0].focus()", stop)
    browser.switch_to.active_element.send_keys(Keys.ENTER)

    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "stop-btn")
    _wait(browser, lambda d: _shown(d, reply_id).get_attribute("data-status") == "stopped", timeout=30)
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "composer-input")
