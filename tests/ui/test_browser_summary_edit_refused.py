"""An edit of a summary the server refuses stays in its dialog, with the reason beside it: the dialog
closed at once and the edit was lost, the reason in a toast ("content: This field may not be blank.")."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.summary_services import summary_discard
from tests.support.browser import console_errors
from tests.support.chat import summarized_chat
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _error(driver) -> str:
    box = driver.find_element(By.ID, "summary-edit-error")
    return box.text if box.is_displayed() else ""


def test_a_refused_summary_edit_keeps_the_dialog_and_its_text(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "summary-refused")
    user = get_user_model().objects.get(username="summary-refused")
    conversation, summary = summarized_chat(user)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    marker = browser.find_element(By.ID, f"m-{summary.pk}")
    browser.execute_script("arguments[0].open = true", marker)
    marker.find_element(By.CSS_SELECTOR, '[data-action="edit-summary"]').click()
    dialog = browser.find_element(By.ID, "summary-dialog")
    area = _wait(browser, lambda d: d.find_element(By.ID, "summary-edit"))
    area.send_keys(Keys.CONTROL, "a")
    area.send_keys(Keys.DELETE)
    save = browser.find_element(By.CSS_SELECTOR, '#summary-dialog button[value="ok"]')

    save.click()

    assert _wait(browser, _error) == "A summary cannot be empty; discard it instead."
    assert dialog.get_attribute("open") is not None

    long_edit = "The first part, rewritten with care: the budget is 40k, the deadline is May."
    area.send_keys(long_edit)
    summary_discard(summary=summary)  # meanwhile, from another tab
    save.click()

    _wait(browser, lambda d: "discarded or replaced" in _error(d))
    assert dialog.get_attribute("open") is not None
    assert area.get_attribute("value") == long_edit
    browser.find_element(By.CSS_SELECTOR, '#summary-dialog button[value="cancel"]').click()
    _wait(browser, lambda d: d.find_element(By.ID, "summary-dialog").get_attribute("open") is None)
    assert not [e for e in console_errors(browser) if "/api/summaries/" not in e["message"]]
