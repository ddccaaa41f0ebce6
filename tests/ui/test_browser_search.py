"""Sidebar search in a real browser: message hits show an escaped, highlighted snippet under their
conversation, and following one opens the chat scrolled to the message, loading earlier pages when
it is older than the first page shown, with the search kept beside it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, Message
from chatapp.chat.search_services import conversation_index_rebuild
from tests.support.browser import HEAR_LIVE_REGIONS, console_errors
from tests.ui.test_browser import _idle, _send, _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_search_hit_links_to_its_message(asgi_server, browser, screenshot_dir):
    base = asgi_server.url
    _sign_up(browser, base, "browser-search")
    user = get_user_model().objects.get(username="browser-search")
    long_chat = Conversation.objects.create(owner=user, title="Long chat", offline=True)
    target = message_append(conversation=long_chat, role="user", token_model="gpt-4o-mini",
                            content='<img src=x onerror="window.__xss=1"> the quokka photos from Rottnest')
    # more than a page of later messages: the hit is not on the page the chat opens with
    Message.objects.bulk_create([
        Message(conversation=long_chat, role="user" if i % 2 == 0 else "assistant", content=f"later message {i}",
                token_count=5, char_count=16)
        for i in range(150)
    ])
    conversation_index_rebuild(conversation=long_chat)
    other = Conversation.objects.create(owner=user, title="Other", offline=True)
    browser.get(f"{base}/c/{other.pk}/")

    box = _wait(browser, lambda d: d.find_element(By.ID, "chat-search"))
    box.send_keys("quokka")
    hit = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{long_chat.pk}"] .conv-hit'))
    assert hit.find_element(By.CSS_SELECTOR, "mark").text == "quokka"
    assert '<img src=x onerror="window.__xss=1">' in hit.text  # shown as text, never as markup
    assert hit.get_attribute("href").endswith(f"/c/{long_chat.pk}/?q=quokka#m-{target.pk}")
    # What shows of a snippet is whole lines: three at most, and no sliver of the next one.
    shown, line = browser.execute_script(
        "const s = getComputedStyle(arguments[0]); return [arguments[0].clientHeight, parseFloat(s.lineHeight)]", hit)
    assert shown % line < 1 or line - shown % line < 1, (shown, line)
    browser.save_screenshot(str(screenshot_dir / "sidebar-search.png"))

    hit.click()
    message = _wait(browser, lambda d: d.find_element(By.ID, f"m-{target.pk}"))
    _wait(browser, lambda d: "is-flash" in message.get_attribute("class"))
    # The word the search matched is marked in the message as in the snippet, and only that word.
    assert [m.text for m in message.find_elements(By.CSS_SELECTOR, "mark.search-mark")] == ["quokka"]
    assert "the quokka photos from Rottnest" in message.text
    assert browser.execute_script("return window.__xss") is None
    # The search is kept: the chat opened shows the same hit beside it, to go on to the next one.
    assert browser.find_element(By.ID, "chat-search").get_attribute("value") == "quokka"
    again = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{long_chat.pk}"] .conv-hit'))
    assert again.find_element(By.CSS_SELECTOR, "mark").text == "quokka"
    assert console_errors(browser) == []


# What a screen reader reads out (HEAR_LIVE_REGIONS), and how often the chats list is redrawn.
HEAR = HEAR_LIVE_REGIONS + """
window.__listed = 0;
document.addEventListener("longchat:sidebar-updated", () => { window.__listed += 1; });
"""


def _status(browser) -> str:
    return browser.find_element(By.ID, "search-status").get_attribute("textContent").strip()


def test_the_chats_list_is_not_read_out_at_each_reply_and_a_search_says_what_it_found(asgi_server, browser):
    """The whole list of chats was a live region: redrawn after every reply (and at every search), a
    screen reader read out every title listed, over the reply's own "Reply complete."."""
    _sign_up(browser, asgi_server.url, "search-hear")
    _send(browser, "Tell me about the quokka photos")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#conv-nav .conv-item") and _idle(d))
    browser.execute_script(HEAR)
    _send(browser, "And about the wombats")
    _wait(browser, lambda d: "Reply complete." in d.find_element(By.ID, "stream-status").get_attribute("textContent"))
    _wait(browser, lambda d: d.execute_script("return window.__listed") > 0)
    assert "conv-nav" not in browser.execute_script("return window.__heard")
    browser.find_element(By.ID, "chat-search").send_keys("wombats")
    _wait(browser, lambda d: _status(d) == "1 chat matches “wombats”.")
    assert "conv-nav" not in browser.execute_script("return window.__heard")

    browser.find_element(By.ID, "chat-search").send_keys(" zebra")
    _wait(browser, lambda d: _status(d) == "No chats match “wombats zebra”.")
    assert browser.find_element(By.CSS_SELECTOR, "#conv-nav .conv-empty").text == "No chats match “wombats zebra”."
    search = browser.find_element(By.ID, "chat-search")
    search.clear()
    search.send_keys("and the")  # stop words only: message text is not searched, and the status says so
    _wait(browser, lambda d: _status(d) == "No chats match “and the”. Titles only: message search looks up no word "
                                           "of “and the” (common and one-letter words, punctuation and emoji are "
                                           "not indexed).")
    assert "conv-nav" not in browser.execute_script("return window.__heard")
    assert console_errors(browser) == []


def test_a_search_hit_opened_from_the_keyboard_puts_the_focus_on_its_message(asgi_server, browser):
    """The message was shown and flashed, but the focus went to the message box at the bottom: a
    screen reader said nothing of the hit, and Tab could not reach the message's own controls."""
    _sign_up(browser, asgi_server.url, "search-focus")
    user = get_user_model().objects.get(username="search-focus")
    chat = Conversation.objects.create(owner=user, title="Animals", offline=True)
    target = message_append(conversation=chat, role="user", token_model="gpt-4o-mini",
                            content="the quokka photos from Rottnest")
    for i in range(6):
        message_append(conversation=chat, role="user" if i % 2 else "assistant", token_model="gpt-4o-mini",
                       content=f"later message {i}")
    conversation_index_rebuild(conversation=chat)
    browser.find_element(By.ID, "chat-search").send_keys("quokka")
    hit = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{chat.pk}"] .conv-hit'))
    browser.execute_script("arguments[0].focus()", hit)
    browser.switch_to.active_element.send_keys(Keys.ENTER)

    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == f"m-{target.pk}")
    browser.switch_to.active_element.send_keys(Keys.TAB)  # on to the message's own controls
    assert browser.switch_to.active_element.get_attribute("data-action") == "copy-message"
    assert console_errors(browser) == []
