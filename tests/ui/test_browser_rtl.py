"""Right-to-left writing in a real browser: a paragraph in Arabic or Hebrew starts at the right, beside
English ones at the left, in your messages, the model's replies, the chat's title and the sidebar."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from chatapp.chat.branch_services import conversation_path_thread
from chatapp.chat.models import Conversation, Message
from chatapp.chat.share_services import conversation_share_create
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARABIC = "مرحبا! كيف حالك؟ أستخدم Python 3.11 كل يوم."
HEBREW = "שלום, מה שלומך? (חשוב!)"

# Where a block's text sits in its box: the gaps between its text and the box's left and right edges.
GAPS = """
const box = arguments[0], range = document.createRange();
range.selectNodeContents(box);
const text = range.getBoundingClientRect(), edge = box.getBoundingClientRect();
const style = getComputedStyle(box);
return {left: text.left - edge.left - parseFloat(style.paddingLeft),
        right: edge.right - text.right - parseFloat(style.paddingRight)};
"""


def test_right_to_left_paragraphs_start_at_the_right(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "rtl-reader")
    conversation = Conversation.objects.create(owner=get_user_model().objects.get(username="rtl-reader"),
                                               title=HEBREW)
    Message.objects.create(conversation=conversation, role="user", content=ARABIC)
    Message.objects.create(conversation=conversation, role="assistant",
                           content=f"{HEBREW}\n\nAnd an English paragraph after it.")
    conversation_path_thread(conversation_id=conversation.pk)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    reply = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg--assistant .md"))

    hebrew, english = reply.find_elements(By.CSS_SELECTOR, "p")
    at = {name: browser.execute_script(GAPS, p) for name, p in (("hebrew", hebrew), ("english", english))}
    assert at["hebrew"]["right"] < 2 < at["hebrew"]["left"], at
    assert at["english"]["left"] < 2 < at["english"]["right"], at
    question = browser.find_element(By.CSS_SELECTOR, ".msg--user .msg-content--plain")
    gaps = browser.execute_script(GAPS, question)
    assert gaps["right"] < 2 or gaps["left"] < 2  # a bubble that fits its text: no side to start from
    assert browser.execute_script("return getComputedStyle(arguments[0]).unicodeBidi", question) == "plaintext"
    for title in (browser.find_element(By.ID, "chat-title"),
                  browser.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{conversation.pk}"] .conv-title')):
        assert browser.execute_script("return getComputedStyle(arguments[0]).unicodeBidi", title) == "plaintext"
    assert browser.find_element(By.ID, "composer-input").get_attribute("dir") == "auto"


# Where a list's item sits in the list: its gaps to the list's left and right edges (the markers' side
# is the wider one).
ITEM_GAPS = """
const list = arguments[0].getBoundingClientRect(), item = arguments[0].firstElementChild.getBoundingClientRect();
return {left: item.left - list.left, right: list.right - item.right};
"""


def test_a_right_to_left_list_has_its_markers_at_the_right(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "rtl-lists")
    conversation = Conversation.objects.create(owner=get_user_model().objects.get(username="rtl-lists"),
                                               title="Lists")
    Message.objects.create(conversation=conversation, role="user", content="Two lists, please.")
    Message.objects.create(conversation=conversation, role="assistant",
                           content=f"- {ARABIC}\n- بند ثاني\n\ntext\n\n1. {HEBREW}\n2. שני\n\n"
                                   "text\n\n- first\n- second")
    conversation_path_thread(conversation_id=conversation.pk)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    reply = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg--assistant .md"))

    arabic, hebrew, english = reply.find_elements(By.CSS_SELECTOR, "ul, ol")
    # the Arabic and Hebrew items read from the right, but their bullets and numbers stood at the left,
    # the list's whole width away
    for rtl in (arabic, hebrew):
        gaps = browser.execute_script(ITEM_GAPS, rtl)
        assert gaps["left"] < 1 < gaps["right"], gaps
    gaps = browser.execute_script(ITEM_GAPS, english)
    assert gaps["right"] < 1 < gaps["left"], gaps


def test_a_right_to_left_title_starts_at_the_right_on_the_share_and_dashboard_pages(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "rtl-titles")
    owner = get_user_model().objects.get(username="rtl-titles")
    conversation = Conversation.objects.create(owner=owner, title=HEBREW)
    Message.objects.create(conversation=conversation, role="user", content=ARABIC)
    conversation_path_thread(conversation_id=conversation.pk)
    token = conversation_share_create(owner=owner, conversation=conversation).token

    # The share page's heading and the dashboard's: the Hebrew title stood at the left.
    pages = ((f"/s/{token}/", "#share-title"), (f"/c/{conversation.pk}/dashboard/", ".dash-heading h1"))
    for path, heading in pages:
        browser.get(asgi_server.url + path)
        title = _wait(browser, lambda d, heading=heading: d.find_element(By.CSS_SELECTOR, heading))
        gaps = browser.execute_script(GAPS, title)
        assert gaps["right"] < 2 < gaps["left"], (path, gaps)
