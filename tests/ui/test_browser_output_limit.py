"""A reply cut at the model's output limit in the browser: marked as it ends, with a Continue on the latest
reply that asks the model for the rest and leaves what is typed in the message box alone."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Conversation, Message
from chatapp.providers.models import LLMConfig
from tests.support.chat import post_stream, send
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CONTINUE_WORDS = "Continue exactly where your last reply stopped."


def _continue_buttons(driver):
    return [b for b in driver.find_elements(By.CSS_SELECTOR, '[data-action="continue"]') if b.is_displayed()]


def test_a_cut_reply_is_marked_and_continue_asks_for_the_rest(asgi_server, browser, fake_openai):
    _, config = _sign_up_with_model(browser, asgi_server.url, "cut-reader", fake_url=fake_openai.base_url,
                                    model="fake-echo", name="Echo")
    # The fake server streams a word-sized piece per token: 3 output tokens cut every reply.
    LLMConfig.objects.filter(pk=config.pk).update(max_output_tokens=3)
    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys("Tell me everything about the bikes in the shed.", Keys.ENTER)

    first = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))[0]
    assert "Cut at output limit" in first.find_element(By.CSS_SELECTOR, ".msg-meta").text
    assert "reached its output limit" in first.find_element(By.CSS_SELECTOR, ".msg-cut").text
    assert [b.find_element(By.XPATH, "ancestor::article") for b in _continue_buttons(browser)] == [first]
    cut = first.find_element(By.CSS_SELECTOR, ".msg-source").get_attribute("value")

    composer.send_keys("a draft of mine")
    _continue_buttons(browser)[0].click()

    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]')) == 2)
    asked = browser.find_elements(By.CSS_SELECTOR, ".msg--user .msg-content")[-1].text
    assert asked == CONTINUE_WORDS
    assert composer.get_attribute("value") == "a draft of mine"
    sent = fake_openai.completions[-1].messages
    assert [m["content"] for m in sent if m["role"] == "assistant"] == [cut]
    assert sent[-1] == {"role": "user", "content": CONTINUE_WORDS}
    # Only the latest reply offers Continue (as Regenerate), after a reload too.
    second = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1]
    assert [b.find_element(By.XPATH, "ancestor::article") for b in _continue_buttons(browser)] == [second]

    browser.refresh()
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg-cut")) == 2)
    replies = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")
    assert [b.find_element(By.XPATH, "ancestor::article") for b in _continue_buttons(browser)] == [replies[-1]]


def _cut_reply(browser, asgi_server, fake_openai, username):
    """A chat whose first reply the model cut at its output limit; returns that reply."""
    _, config = _sign_up_with_model(browser, asgi_server.url, username, fake_url=fake_openai.base_url,
                                    model="fake-echo", name="Echo")
    LLMConfig.objects.filter(pk=config.pk).update(max_output_tokens=3)
    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys("Tell me everything about the bikes in the shed.", Keys.ENTER)
    return _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))[0]


def test_continue_pressed_from_the_keyboard_leaves_the_focus_in_the_message_box(asgi_server, browser, fake_openai):
    # The button is hidden once the next reply is the latest: the focus it held must not fall to the page
    # (a touch device's screen reader would start again from its top), whatever the pointer.
    _cut_reply(browser, asgi_server, fake_openai, "cut-keyboard")
    _wait(browser, lambda d: "is-streaming" not in d.find_element(By.ID, "app").get_attribute("class"))
    button = _continue_buttons(browser)[0]
    browser.execute_script("arguments[0].focus()", button)
    button.send_keys(Keys.ENTER)

    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]')) == 2)
    _wait(browser, lambda d: "is-streaming" not in d.find_element(By.ID, "app").get_attribute("class"))
    assert not button.is_displayed()
    assert browser.switch_to.active_element.get_attribute("id") == "composer-input"


def test_a_screen_reader_is_told_the_reply_was_cut(asgi_server, browser, fake_openai):
    # The badge and the note are seen; a screen reader hears only the live region, which must not say "complete".
    _cut_reply(browser, asgi_server, fake_openai, "cut-listener")
    status = browser.find_element(By.ID, "stream-status")
    _wait(browser, lambda d: "is-streaming" not in d.find_element(By.ID, "app").get_attribute("class"))
    assert "cut at the output limit" in status.get_attribute("textContent")


def test_continue_on_a_page_left_behind_sends_nothing_and_shows_where_the_chat_went(asgi_server, browser, fake_openai):
    # Another tab continued the cut reply; this page, left behind, still offered Continue on it, and it
    # sent a second "Continue" after the first's answer, asking the model to go on from that one.
    first = _cut_reply(browser, asgi_server, fake_openai, "cut-two-tabs")
    _wait(browser, lambda d: "is-streaming" not in d.find_element(By.ID, "app").get_attribute("class"))
    conversation = Conversation.objects.get(owner__username="cut-two-tabs")
    assert send(conversation.owner, conversation, CONTINUE_WORDS).names[-1] == "done"  # the other tab
    asked = len(fake_openai.completions)
    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys("a draft of mine")

    [button] = _continue_buttons(browser)
    assert button.find_element(By.XPATH, "ancestor::article") == first
    button.click()

    error = _wait(browser, lambda d: d.find_elements(By.ID, "composer-error"))[0]
    assert "another tab" in error.text
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]')) == 2)
    asked_on_page = [m.text for m in browser.find_elements(By.CSS_SELECTOR, ".msg--user .msg-content")]
    assert asked_on_page == ["Tell me everything about the bikes in the shed.", CONTINUE_WORDS]
    assert Message.objects.filter(conversation=conversation, content=CONTINUE_WORDS).count() == 1
    assert len(fake_openai.completions) == asked
    assert composer.get_attribute("value") == "a draft of mine"
    newest = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1]
    assert [b.find_element(By.XPATH, "ancestor::article") for b in _continue_buttons(browser)] == [newest]


def test_continue_on_a_page_left_behind_by_a_regenerate_shows_the_new_reply_only(asgi_server, browser, fake_openai):
    # Another tab regenerated the cut reply; this page's Continue on the old one was refused, and its
    # catch-up appended the regenerated reply below the old: two answers to one question, as if the
    # model had replied twice in a row, until a reload.
    first = _cut_reply(browser, asgi_server, fake_openai, "cut-regenerated")
    _wait(browser, lambda d: "is-streaming" not in d.find_element(By.ID, "app").get_attribute("class"))
    conversation = Conversation.objects.get(owner__username="cut-regenerated")
    old_id = int(first.get_attribute("data-id"))
    regenerated = post_stream(conversation.owner, f"/api/messages/{old_id}/regenerate/", {})  # the other tab
    assert regenerated.names[-1] == "done", regenerated.events
    new_id = regenerated.named("done")[0]["message"]["id"]

    _continue_buttons(browser)[0].click()

    _wait(browser, lambda d: d.find_elements(By.ID, f"m-{new_id}"))
    error = _wait(browser, lambda d: d.find_elements(By.ID, "composer-error"))[0]
    assert "another tab" in error.text
    shown = [int(m.get_attribute("data-id")) for m in browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")]
    assert shown == [new_id]
    assert [m.text for m in browser.find_elements(By.CSS_SELECTOR, ".msg--user .msg-content")] == [
        "Tell me everything about the bikes in the shed."
    ]
    assert not Message.objects.filter(conversation=conversation, content=CONTINUE_WORDS).exists()


def test_a_send_from_a_page_left_behind_by_a_regenerate_shows_the_path_it_follows(asgi_server, browser, fake_openai):
    # Another tab regenerated the reply; this page's next message went after the regenerated one (as the
    # model saw it), and the page put that reply in above it, below the old: two answers in a row.
    first = _cut_reply(browser, asgi_server, fake_openai, "send-after-regenerate")
    _wait(browser, lambda d: "is-streaming" not in d.find_element(By.ID, "app").get_attribute("class"))
    conversation = Conversation.objects.get(owner__username="send-after-regenerate")
    regenerated = post_stream(conversation.owner, f"/api/messages/{first.get_attribute('data-id')}/regenerate/", {})
    new_id = regenerated.named("done")[0]["message"]["id"]

    browser.find_element(By.ID, "composer-input").send_keys("And the red one?", Keys.ENTER)

    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]')) >= 2
          and "is-streaming" not in d.find_element(By.ID, "app").get_attribute("class"))
    shown = [int(m.get_attribute("data-id")) for m in browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")]
    path = list(Message.objects.filter(conversation=conversation, role="assistant", superseded=False)
                .order_by("id").values_list("id", flat=True))
    assert shown == path and path[0] == new_id
