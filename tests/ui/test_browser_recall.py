"""The chat in a real browser when a request recalled old messages: the gauge, the timeline, the divider."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation, Message
from tests.support.browser import console_errors
from tests.support.recall import FACT_ANSWER, QUESTION, memory_recall, seed_with_fact
from tests.ui.test_browser import _send, _sign_up_with_model, _wait

__all__ = ["memory_recall"]

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.usefixtures("memory_recall")
def test_recalled_messages_are_marked_in_the_chat_and_the_gauge(asgi_server, browser, fake_openai, screenshot_dir):
    base = asgi_server.url
    user, config = _sign_up_with_model(browser, base, "browser-recall", fake_url=fake_openai.base_url,
                                       model="fake-echo", name="Echo 16k", temperature=0.0)
    conversation = Conversation.objects.create(owner=user, llm_config=config, title="Recall")
    ids = seed_with_fact(conversation)
    browser.get(f"{base}/c/{conversation.pk}/")

    _send(browser, QUESTION)

    fact = Message.objects.get(conversation=conversation, content=FACT_ANSWER)
    assert fact.pk == ids[7]
    item = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f"#m-{fact.pk}.is-recalled"))
    assert item.find_element(By.CSS_SELECTOR, ".badge--recalled").is_displayed()
    assert not item.find_element(By.CSS_SELECTOR, ".badge--outside").is_displayed()
    # A message left out and not quoted stays marked as outside.
    other = browser.find_element(By.ID, f"m-{ids[12]}")
    assert "is-recalled" not in other.get_attribute("class")
    marker = browser.find_element(By.CSS_SELECTOR, ".window-marker").text
    assert "recalled for the latest one" in marker
    browser.find_element(By.ID, "gauge").click()
    details = _wait(browser, lambda d: d.find_element(By.ID, "gauge-details"))
    assert "Recalled" in details.text and "earlier message" in details.text and "for your last message" in details.text
    assert console_errors(browser) == []
    browser.save_screenshot(str(screenshot_dir / "chat-recall.png"))
