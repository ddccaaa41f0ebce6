"""The chat header's menu in a real browser (issue 13): a system prompt set from its dialog reaches the
model on the next message and moves the gauge; the export links point at the chat."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.gauge import context_gauge
from chatapp.chat.models import Conversation
from chatapp.chat.services import SYSTEM_PROMPT_MAX_CHARS
from tests.support.browser import console_errors
from tests.ui.test_browser import _menu_dialog, _send, _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROMPT = "You are a terse reviewer of SQL migrations. " + " ".join(f"Rule {i}: check locks." for i in range(40))


def _gauge_text(driver) -> str:
    return driver.find_element(By.ID, "gauge-text").text


def test_system_prompt_from_the_header_menu_reaches_the_model_and_the_gauge(
    asgi_server, browser, fake_openai, screenshot_dir
):
    base = asgi_server.url
    user, _ = _sign_up_with_model(browser, base, "browser-prompt", fake_url=fake_openai.base_url, model="fake-echo",
                                  name="Echo", temperature=0.0)
    browser.refresh()
    _send(browser, "First question about an index.")
    conversation = Conversation.objects.get(owner=user)
    _wait(browser, lambda d: _gauge_text(d).endswith("/ 15.5k"))
    before = _gauge_text(browser)

    # Keyboard: the menu button opens the menu with focus on its first item; Enter opens the dialog.
    menu_button = browser.find_element(By.ID, "conv-menu-btn")
    menu_button.click()
    _wait(browser, lambda d: d.find_element(By.ID, "conv-menu").is_displayed())
    assert menu_button.get_attribute("aria-expanded") == "true"
    browser.save_screenshot(str(screenshot_dir / "chat-header-menu.png"))
    exports = browser.find_elements(By.CSS_SELECTOR, "#conv-menu a[download]")
    assert [a.get_attribute("href") for a in exports] == [
        f"{base}/api/conversations/{conversation.pk}/export/?format=markdown",
        f"{base}/api/conversations/{conversation.pk}/export/?format=json",
    ]
    focused = browser.switch_to.active_element
    assert focused.get_attribute("data-action") == "edit-system-prompt"
    focused.send_keys(Keys.ENTER)
    dialog = browser.find_element(By.ID, "system-prompt-dialog")
    _wait(browser, lambda d: dialog.get_attribute("open") is not None)
    area = browser.find_element(By.ID, "system-prompt-text")
    _wait(browser, lambda d: d.switch_to.active_element == area)
    area.send_keys(PROMPT)
    browser.save_screenshot(str(screenshot_dir / "chat-system-prompt-dialog.png"))
    browser.find_element(By.ID, "system-prompt-save").click()
    _wait(browser, lambda d: dialog.get_attribute("open") is None)

    # Saved, and the gauge refreshed from the server: the prompt is part of the next request.
    conversation.refresh_from_db()
    assert conversation.system_prompt == PROMPT
    _wait(browser, lambda d: _gauge_text(d) != before)
    expected = context_gauge(conversation=conversation, user=user)["tokens"]
    assert browser.find_element(By.ID, "gauge").get_attribute("title").startswith(f"Next request: {expected:,} of")

    fake_openai.reset()
    reply = _send(browser, "Second question.")
    assert reply.get_attribute("data-status") == "complete"
    assert fake_openai.completions[-1].messages[0] == {"role": "system", "content": PROMPT}

    # Reopened, the dialog shows the saved text; Escape closes it without a change.
    browser.execute_script("arguments[0].value = ''", area)  # what it shows next is read from the server
    menu_button.click()
    browser.find_element(By.CSS_SELECTOR, "[data-action='edit-system-prompt']").click()
    _wait(browser, lambda d: dialog.get_attribute("open") is not None)
    _wait(browser, lambda d: area.get_attribute("value") == PROMPT)
    area.send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: dialog.get_attribute("open") is None)
    conversation.refresh_from_db()
    assert conversation.system_prompt == PROMPT
    assert console_errors(browser) == []


def test_a_system_prompt_too_long_for_the_budget_is_saved_with_a_warning(asgi_server, browser, fake_openai):
    base = asgi_server.url
    _, config = _sign_up_with_model(browser, base, "browser-long-prompt", fake_url=fake_openai.base_url,
                                    model="fake-echo", name="Echo small")
    type(config).objects.filter(pk=config.pk).update(context_window=2_000, max_output_tokens=300)
    browser.refresh()
    _send(browser, "First question about an index.")
    # the dialog opens once the chat's prompt is read: typed before, the text would be overwritten
    _menu_dialog(browser, "edit-system-prompt", "system-prompt-dialog")
    area = browser.find_element(By.ID, "system-prompt-text")
    _wait(browser, lambda d: d.switch_to.active_element == area)
    # Over the stored limit: refused beside the text, the dialog open and the text kept.
    refused = "x" * (SYSTEM_PROMPT_MAX_CHARS + 1)
    browser.execute_script("arguments[0].value = arguments[1]", area, refused)
    browser.find_element(By.ID, "system-prompt-save").click()
    error = browser.find_element(By.ID, "system-prompt-error")
    _wait(browser, lambda d: error.is_displayed())
    assert f"at most {SYSTEM_PROMPT_MAX_CHARS:,} characters" in error.text
    assert browser.find_element(By.ID, "system-prompt-dialog").get_attribute("open") is not None
    assert area.get_attribute("value") == refused
    assert browser.switch_to.active_element == area
    rules = "\n".join(f"Rule {i}: answer in the house style, citing handbook section {i}." for i in range(250))
    browser.execute_script("arguments[0].value = arguments[1]", area, rules)
    browser.find_element(By.ID, "system-prompt-save").click()

    # it said only "System prompt saved", and the prompt went out cut to a quarter of the budget
    toast = _wait(browser, lambda d: [t for t in d.find_elements(By.CSS_SELECTOR, "#toasts .toast")
                                      if "saved" in t.text])[0]
    assert "too long for this model's budget" in toast.text
    browser.find_element(By.ID, "gauge").click()
    assert "sent shortened" in browser.find_element(By.ID, "gauge-details").text
    # The refusal's 400 is the only failed load the browser logs.
    assert [e for e in console_errors(browser) if "400 (Bad Request)" not in e["message"]] == []
