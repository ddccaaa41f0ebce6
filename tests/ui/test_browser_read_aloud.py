"""Read aloud in headless Chromium: a message's ⋯ menu speaks it through the browser's speech synthesis
(speech.js). The page's `speechSynthesis` is replaced by a recorder, so what the page asks the browser to
say is what is checked (headless Chromium has no voice to hear)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation, Message
from tests.support.browser import console_errors
from tests.ui.test_browser import _send, _sign_up, _wait
from tests.ui.test_browser_branches import _click

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECORD_SPEECH = """
window.__spoken = []; window.__cancels = 0;
speechSynthesis.speak = (utterance) => { window.__spoken.push(utterance); };
speechSynthesis.cancel = () => { window.__cancels += 1; window.__spoken = []; };
"""
REPLY = ("**Hi** there. Some details:\n\n- one\n- two\n\n```py\nprint(1)\n```\n\n"
         "So $x^2$ holds. See [the docs](https://example.com/docs).")


def _open_chat(browser, base: str, username: str, reply: str) -> Message:
    _sign_up(browser, base, username)
    user = get_user_model().objects.get(username=username)
    conversation = Conversation.objects.create(owner=user, title="Speech")
    Message.objects.create(conversation=conversation, role="user", content="Tell me.")
    answer = Message.objects.create(conversation=conversation, role="assistant", content=reply)
    browser.get(f"{base}/c/{conversation.pk}/")
    _wait(browser, lambda d: d.find_elements(By.ID, f"m-{answer.pk}"))
    return answer


def _choose(browser, message_id, action: str) -> None:
    article = browser.find_element(By.ID, f"m-{message_id}")
    _click(browser, article.find_element(By.CSS_SELECTOR, '[data-action="message-menu"]'))
    _click(browser, article.find_element(By.CSS_SELECTOR, f'[data-action="{action}"]'))


def _spoken(browser) -> list[str]:
    return browser.execute_script("return window.__spoken.map((u) => u.text)")


def _item_label(browser, message_id) -> str:
    return browser.find_element(By.CSS_SELECTOR, f'#m-{message_id} [data-action="read-aloud"] span') \
        .get_attribute("textContent")


def test_read_aloud_speaks_a_reply_as_it_reads_and_the_same_item_stops_it(asgi_server, browser):
    answer = _open_chat(browser, asgi_server.url, "speech-reply", REPLY)
    browser.execute_script(RECORD_SPEECH)

    _choose(browser, answer.pk, "read-aloud")
    # The words, not the markup: the code block and the formula are named, not spelled out.
    assert _spoken(browser) == [
        "Hi there. Some details:", "one", "two", "Code block.", "So formula holds. See the docs.",
    ]
    assert _item_label(browser, answer.pk) == "Stop reading"
    assert "is-speaking" in browser.find_element(By.ID, f"m-{answer.pk}").get_attribute("class")

    _choose(browser, answer.pk, "read-aloud")  # "Stop reading"
    assert browser.execute_script("return window.__cancels") == 1
    assert _item_label(browser, answer.pk) == "Read aloud"
    assert "is-speaking" not in browser.find_element(By.ID, f"m-{answer.pk}").get_attribute("class")

    # Read to its end: the item offers to read it again.
    _choose(browser, answer.pk, "read-aloud")
    browser.execute_script("window.__spoken.at(-1).dispatchEvent(new Event('end'))")
    _wait(browser, lambda d: _item_label(d, answer.pk) == "Read aloud")
    assert console_errors(browser) == []


def test_a_long_reply_is_queued_in_pieces_that_keep_every_word(asgi_server, browser):
    sentence = "This sentence is here to make the reply long enough to be cut into several pieces. "
    long_word_run = " ".join(["word"] * 120)  # no sentence end at all: cut between words
    answer = _open_chat(browser, asgi_server.url, "speech-long", sentence * 8 + "\n\n" + long_word_run)
    browser.execute_script(RECORD_SPEECH)

    _choose(browser, answer.pk, "read-aloud")
    pieces = _spoken(browser)
    assert len(pieces) > 3 and all(len(p) <= 220 for p in pieces)
    assert " ".join(pieces).split() == (sentence * 8 + long_word_run).split()


def test_your_own_message_is_read_as_typed_from_a_message_the_page_drew(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "speech-own")
    _send(browser, "Remember: the *plan* is <b>ready</b>.")
    browser.execute_script(RECORD_SPEECH)
    mine = browser.find_elements(By.CSS_SELECTOR, ".msg--user")[-1].get_attribute("data-id")

    _choose(browser, mine, "read-aloud")
    assert _spoken(browser) == ["Remember: the *plan* is <b>ready</b>."]


def test_no_read_aloud_where_the_browser_has_no_speech_synthesis(asgi_server, browser):
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {
        "source": "Object.defineProperty(window, 'speechSynthesis', {value: undefined, configurable: true});"})
    answer = _open_chat(browser, asgi_server.url, "speech-none", "A reply.")
    article = browser.find_element(By.ID, f"m-{answer.pk}")
    _click(browser, article.find_element(By.CSS_SELECTOR, '[data-action="message-menu"]'))
    assert article.find_element(By.CSS_SELECTOR, '[data-action="fork-chat"]').is_displayed()
    assert not article.find_element(By.CSS_SELECTOR, '[data-action="read-aloud"]').is_displayed()
    # Nor on a message the page draws itself.
    _send(browser, "And another?")
    latest = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1]
    _click(browser, latest.find_element(By.CSS_SELECTOR, '[data-action="message-menu"]'))
    assert not latest.find_element(By.CSS_SELECTOR, '[data-action="read-aloud"]').is_displayed()
    assert console_errors(browser) == []


def test_a_browser_that_cannot_speak_says_so_and_the_item_reads_read_aloud_again(asgi_server, browser):
    """A browser with the API but no voice it can use (Chromium on Linux without speech-dispatcher) fails
    each utterance: nothing was heard, and nothing said why. Stopping it is no failure."""
    answer = _open_chat(browser, asgi_server.url, "speech-failed", "One paragraph.\n\nAnother one.")
    browser.execute_script(RECORD_SPEECH)
    fail = (
        "const u = window.__spoken[0];"
        "u.dispatchEvent(new SpeechSynthesisErrorEvent('error', {utterance: u, error: arguments[0]}))"
    )

    _choose(browser, answer.pk, "read-aloud")
    assert _spoken(browser) == ["One paragraph.", "Another one."]
    browser.execute_script(fail, "interrupted")  # as when stopped: said by no one
    assert _item_label(browser, answer.pk) == "Stop reading"
    browser.execute_script(fail, "synthesis-failed")
    toast = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".toast--error"))[0]
    said = toast.get_attribute("textContent")
    assert "could not read" in said and "synthesis-failed" in said
    assert _item_label(browser, answer.pk) == "Read aloud"
    assert "is-speaking" not in browser.find_element(By.ID, f"m-{answer.pk}").get_attribute("class")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".toast--error")) == 1


def test_a_task_list_is_read_with_each_items_state(asgi_server, browser):
    """A task list's boxes are seen ticked or not; read aloud, its items were only their words, as if
    nothing were done."""
    answer = _open_chat(browser, asgi_server.url, "speech-tasks", "Plan:\n\n- [x] read the docs\n- [ ] write tests\n")
    browser.execute_script(RECORD_SPEECH)
    _choose(browser, answer.pk, "read-aloud")
    assert _spoken(browser) == ["Plan:", "Done: read the docs", "To do: write tests"]
