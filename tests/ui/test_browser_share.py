"""Share links in a real browser (issue 13): "Share…" in the chat header's menu makes a link and shows
it with a Copy button; the link opens, logged out, as a script-free read-only page under a CSP that lets no
script run (share_views.SHARE_CSP)."""

from __future__ import annotations

import struct
import zlib

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.image_models import MessageImage
from chatapp.chat.models import Conversation, ConversationShare, Message
from chatapp.chat.share_services import conversation_share_create
from tests.support.browser import console_errors
from tests.support.images import png_bytes
from tests.ui.test_browser import XSS, _menu_dialog, _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_share_from_the_header_menu_then_read_the_link_logged_out(asgi_server, browser, screenshot_dir):
    base = asgi_server.url
    _sign_up(browser, base, "browser-sharer")
    user = get_user_model().objects.get(username="browser-sharer")
    conversation = Conversation.objects.create(owner=user, title="Sourdough notes")
    Message.objects.create(conversation=conversation, role="user", content=f"How long to proof? {XSS}")
    Message.objects.create(
        conversation=conversation, role="assistant",
        content=f"About **12 hours** in the fridge.\n\n```python\nprint('fold')\n```\n\n{XSS}",
    )

    browser.get(f"{base}/c/{conversation.pk}/")
    console_errors(browser)  # start from a clean log
    dialog = _menu_dialog(browser, "share-conversation", "share-dialog")
    # Opening the dialog publishes nothing: it says what a link shows, and makes one when asked.
    create = dialog.find_element(By.CSS_SELECTOR, '[data-action="create-share-link"]')
    assert browser.switch_to.active_element == create
    assert not browser.find_element(By.ID, "share-link").is_displayed()
    assert not ConversationShare.objects.filter(conversation=conversation).exists()
    create.click()
    _wait(browser, lambda d: d.find_element(By.ID, "share-link").get_attribute("value"))
    link = browser.find_element(By.ID, "share-link").get_attribute("value")
    assert browser.switch_to.active_element.get_attribute("id") == "share-link"
    assert link.startswith(f"{base}/s/") and ConversationShare.objects.filter(conversation=conversation).count() == 1
    assert "Copy it now" in dialog.text  # shown this once: Settings cannot show it again
    # The dialog's second step: Create link and Cancel give way to Done.
    assert not create.is_displayed() and dialog.find_element(By.CSS_SELECTOR, 'button[value="close"]').is_displayed()
    browser.save_screenshot(str(screenshot_dir / "chat-share-dialog.png"))
    copy = dialog.find_element(By.CSS_SELECTOR, '[data-action="copy-share-link"]')
    copy.click()
    # Headless Chromium may refuse the clipboard: either way the button says what happened.
    _wait(browser, lambda d: copy.text.strip() in {"Copied", "Copy failed"})
    # Esc closes it, focus back on the menu's button (the item that opened it is hidden)
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: dialog.get_attribute("open") is None)
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "conv-menu-btn")
    assert console_errors(browser) == []

    browser.delete_all_cookies()  # a reader without an account
    browser.get(link)
    _wait(browser, lambda d: d.find_elements(By.ID, "share-title"))
    assert browser.find_element(By.ID, "share-title").text == "Sourdough notes"
    assert "Shared conversation" in browser.find_element(By.CSS_SELECTOR, ".share-head").text
    articles = browser.find_elements(By.CSS_SELECTOR, "article.msg")
    assert [a.get_attribute("class").split()[1] for a in articles] == ["msg--user", "msg--assistant"]
    assert "<script>window.__xss=1</script>" in articles[0].text  # shown as typed, inert
    assert articles[1].find_element(By.CSS_SELECTOR, "strong").text == "12 hours"
    assert articles[1].find_elements(By.CSS_SELECTOR, "pre.hl")  # highlighted like the chat
    assert browser.execute_script("return window.__xss") is None
    assert browser.find_element(By.CSS_SELECTOR, 'meta[name="robots"]').get_attribute("content") == "noindex, nofollow"
    browser.save_screenshot(str(screenshot_dir / "share-page.png"))
    assert console_errors(browser) == []  # no CSP violation, no failed load


def test_share_cancelled_publishes_nothing(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "browser-unsharer")
    user = get_user_model().objects.get(username="browser-unsharer")
    conversation = Conversation.objects.create(owner=user, title="Private notes")
    Message.objects.create(conversation=conversation, role="user", content="Only for me")
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    dialog = _menu_dialog(browser, "share-conversation", "share-dialog")
    dialog.find_element(By.CSS_SELECTOR, 'button[value="cancel"]').click()
    _wait(browser, lambda d: dialog.get_attribute("open") is None)
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "conv-menu-btn")
    assert not ConversationShare.objects.filter(conversation=conversation).exists()


def test_a_shared_image_is_drawn_without_its_metadata(asgi_server, browser):
    """The link's image, its text and EXIF chunks left out (image_metadata), is still a picture the browser
    draws, on a page whose CSP lets it load; and its file's name is not on the page."""
    user = get_user_model().objects.create_user(username="browser-photographer", password="a long test password 1")
    conversation = Conversation.objects.create(owner=user, title="Photos", has_images=True)
    message = Message.objects.create(conversation=conversation, role="user", content="Look")
    plain = png_bytes(6, 4)
    text = b"tEXt" + b"Author\x00Zelda Owner"
    author = struct.pack(">I", len(text) - 4) + text + struct.pack(">I", zlib.crc32(text))
    data = plain[:33] + author + plain[33:]
    MessageImage.objects.create(message=message, mime="image/png", width=6, height=4, byte_count=len(data),
                                name="zelda-at-home.png", data=data)
    token = conversation_share_create(owner=user, conversation=conversation).token

    browser.get(f"{asgi_server.url}/s/{token}/")
    _wait(browser, lambda d: d.execute_script("const i = document.querySelector('.msg-image img');"
                                              "return i && i.complete && i.naturalWidth"))
    image = browser.find_element(By.CSS_SELECTOR, ".msg-image img")

    assert browser.execute_script("return arguments[0].naturalWidth", image) == 6
    assert image.get_attribute("alt") == "Image (6x4)" and "zelda-at-home" not in browser.page_source
    assert console_errors(browser) == []  # no CSP violation, no failed load
