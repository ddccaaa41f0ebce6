"""Signed out from a chat or from Settings, Back does not show that page again from the browser's
back-forward cache (a shared computer's next user would read the chats): the browser asks the server,
which asks for a sign-in."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.ui.test_browser import _sign_up, _wait
from tests.ui.test_browser_sidebar_rename import _chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("page", ["chat", "settings"])
def test_back_after_signing_out_shows_the_sign_in_page_not_the_users_page(asgi_server, browser, page):
    _sign_up(browser, asgi_server.url, "shared-computer")
    chat = _chat("shared-computer", "Salary negotiation notes")
    path = f"/c/{chat.pk}/" if page == "chat" else "/settings/"
    browser.get(f"{asgi_server.url}{path}")
    _wait(browser, lambda d: "Salary negotiation notes" in d.find_element(By.ID, "chat-title").text
          if page == "chat" else d.find_elements(By.ID, "api-h"))

    browser.find_element(By.CSS_SELECTOR, 'form[action="/accounts/logout/"] button[type=submit]').click()
    _wait(browser, lambda d: "/accounts/login/" in d.current_url)
    browser.back()

    _wait(browser, lambda d: d.current_url.endswith(f"/accounts/login/?next={path}"))
    assert "Salary negotiation notes" not in browser.find_element(By.TAG_NAME, "body").text
