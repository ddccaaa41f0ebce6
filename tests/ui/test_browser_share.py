"""Share links in a real browser (issue 13): "Share…" in the chat header's menu makes a link and shows
it with a Copy button; the link opens, logged out, as a script-free read-only page under the app's CSP."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Conversation, ConversationShare, Message
from tests.support.browser import console_errors
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
