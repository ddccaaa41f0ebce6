"""A toast on the chat page shows above the message box, however tall the draft in it has grown."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.branch_services import conversation_path_thread
from chatapp.chat.models import Conversation, Message
from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# How far the toast shown reaches down over the message box (≤ 0: it ends above it).
TOAST_OVER_BOX = """
const toast = document.querySelector('#toasts .toast');
if (!toast || toast.getAnimations().length) return null;
return [toast.getBoundingClientRect().bottom - document.getElementById('composer').getBoundingClientRect().top];
"""


def test_a_toast_does_not_cover_a_long_draft(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "toast-draft")
    conversation = Conversation.objects.create(owner=get_user_model().objects.get(username="toast-draft"),
                                               title="Toasts")
    Message.objects.create(conversation=conversation, role="user", content="Copy me.")
    Message.objects.create(conversation=conversation, role="assistant", content="Copied.")
    conversation_path_thread(conversation_id=conversation.pk)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    box = _wait(browser, lambda d: d.find_element(By.ID, "composer-input"))
    for line in range(7):
        box.send_keys(f"point {line} of my question", Keys.SHIFT, Keys.ENTER)
    browser.find_elements(By.CSS_SELECTOR, '[data-action="copy-message"]')[-1].click()

    [over] = _wait(browser, lambda d: d.execute_script(TOAST_OVER_BOX), timeout=5)
    # the toast sat 112px up from the window's foot, over the lines being written
    assert over <= 0, over
    assert console_errors(browser) == []
