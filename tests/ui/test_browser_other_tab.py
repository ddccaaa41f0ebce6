"""A reply streaming in another tab (issue 14, finding 7): a page opened meanwhile follows it to the
end instead of showing "Writing…" forever."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation, Message
from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _following(browser, base: str, username: str, title: str, *, question: str = "Write a haiku about tiles."):
    """A new user's chat whose reply is streaming elsewhere, opened in the browser, which shows it
    "Writing…": (conversation, question, reply)."""
    _sign_up(browser, base, username)
    user = get_user_model().objects.get(username=username)
    conversation = Conversation.objects.create(owner=user, title=title)
    asked = Message.objects.create(conversation=conversation, role="user", content=question)
    reply = Message.objects.create(conversation=conversation, role="assistant", content="Blue tiles",
                                   status=Message.Status.STREAMING, parent=asked, reply_to=asked)
    browser.get(f"{base}/c/{conversation.pk}/")
    assert "Writing…" in browser.find_element(By.ID, f"m-{reply.pk}").text
    return conversation, asked, reply


def test_a_page_follows_a_reply_streaming_elsewhere(asgi_server, browser):
    conversation, _, reply = _following(browser, asgi_server.url, "tab-follower", "Two tabs")

    # the other tab's stream ends: the reply is stored whole, and the next question arrives too
    Message.objects.filter(pk=reply.pk).update(
        status=Message.Status.COMPLETE, content="Blue tiles at noon\nsea light on the old facade\na cat sleeps on them"
    )
    later = Message.objects.create(conversation=conversation, role="user", content="Another one, about rain.")

    _wait(browser, lambda d: "a cat sleeps on them" in d.find_element(By.ID, f"m-{reply.pk}").text, timeout=15)
    assert "Writing…" not in browser.find_element(By.ID, f"m-{reply.pk}").text
    assert "about rain" in browser.find_element(By.ID, f"m-{later.pk}").text
    assert console_errors(browser) == []


def test_a_followed_reply_whose_chat_is_deleted_elsewhere_says_so_and_frees_the_composer(asgi_server, browser):
    """The chat deleted in the tab that streams it: this page went on showing "Writing…" with Stop (which
    did nothing) and asked the server every 2 s for a quarter of an hour. It says the chat was deleted,
    as the streaming tab does, and the composer is free again."""
    conversation, _, reply = _following(browser, asgi_server.url, "tab-left-behind", "Deleted elsewhere")
    assert browser.find_element(By.ID, "stop-btn").is_displayed()

    conversation.delete()

    _wait(browser, lambda d: "was deleted" in d.find_element(By.ID, f"m-{reply.pk}").text, timeout=15)
    article = browser.find_element(By.ID, f"m-{reply.pk}")
    assert "Writing…" not in article.text and article.get_attribute("data-status") == "error"
    assert not article.find_elements(By.XPATH, ".//button[normalize-space()='Retry']")
    assert browser.find_element(By.ID, "send-btn").is_displayed()
    assert not browser.find_element(By.ID, "stop-btn").is_displayed()
    # The page's own requests for the deleted chat answer 404 (a failed load); no script failed.
    assert [e for e in console_errors(browser) if "Failed to load resource" not in e["message"]] == []


def test_a_followed_reply_replaced_by_a_retry_elsewhere_gives_way_to_the_new_one(asgi_server, browser):
    """The server process streaming the reply died; a minute later another tab's Retry took its silent
    stream over (chat_retry), so it left the path. This page followed it as "Writing…" for good: the
    path's messages no longer held it, and the composer stayed busy. It gives way to the new reply."""
    conversation, question, silent = _following(browser, asgi_server.url, "tab-retried-elsewhere", "Retried elsewhere")

    # What chat_retry_start does in the other tab: the silent reply leaves the path, a new one answers.
    Message.objects.filter(pk=silent.pk).update(superseded=True, off_path_by=silent.pk)
    retried = Message.objects.create(conversation=conversation, role="assistant", parent=question, reply_to=question,
                                     content="Blue tiles at noon\nsea light on the old facade\na cat sleeps on them")

    _wait(browser, lambda d: "a cat sleeps on them" in d.find_element(By.ID, f"m-{retried.pk}").text, timeout=15)
    _wait(browser, lambda d: not d.find_elements(By.ID, f"m-{silent.pk}"), timeout=15)
    assert "Writing…" not in browser.find_element(By.ID, "messages").text
    assert browser.find_element(By.ID, "send-btn").is_displayed()
    assert not browser.find_element(By.ID, "stop-btn").is_displayed()
    assert console_errors(browser) == []


# The page's clock moved on by `ms` (Date.now), and its reads of the followed reply held until released:
# a quarter of an hour of following, without waiting for it.
_CLOCK_AND_GATE = """
const realNow = Date.now; let shift = 0;
Date.now = () => realNow() + shift;
window.__shiftClock = (ms) => { shift += ms; };
const realFetch = window.fetch; let open = null; const gate = new Promise((resolve) => { open = resolve; });
window.__openReads = () => open();
window.fetch = async (url, init) => { if (String(url).includes("?since=")) await gate; return realFetch(url, init); };
"""


def test_a_reply_still_written_after_a_quarter_of_an_hour_is_followed_to_its_end(asgi_server, browser):
    """A slow local model (a few tokens a second on a CPU) writes a long answer for more than 15 minutes:
    a page reloaded meanwhile, or another tab, stopped following it then, left "Writing…" and its composer
    busy for good, though the reply went on and ended. Following stops after 15 minutes without progress."""
    _, _, reply = _following(browser, asgi_server.url, "tab-slow-model", "Slow model",
                             question="Write a long haiku about tiles.")
    browser.execute_script(_CLOCK_AND_GATE)
    browser.execute_script("window.__shiftClock(16 * 60 * 1000);")
    Message.objects.filter(pk=reply.pk).update(content="Blue tiles at noon")  # a checkpoint of its stream
    browser.execute_script("window.__openReads();")
    _wait(browser, lambda d: "at noon" in d.find_element(By.ID, f"m-{reply.pk}").text, timeout=15)

    Message.objects.filter(pk=reply.pk).update(
        status=Message.Status.COMPLETE, content="Blue tiles at noon\nsea light on the old facade\na cat sleeps on them"
    )
    _wait(browser, lambda d: "a cat sleeps on them" in d.find_element(By.ID, f"m-{reply.pk}").text, timeout=15)
    assert "Writing…" not in browser.find_element(By.ID, f"m-{reply.pk}").text
    assert browser.find_element(By.ID, "send-btn").is_displayed()
    assert console_errors(browser) == []
