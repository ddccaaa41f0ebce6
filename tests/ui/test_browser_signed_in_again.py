"""A page left open while its user signs out, and in again, in another tab: signed in again, it keeps
working (signing in renews the CSRF token, and the page's calls sent the one it was drawn with, its meta
tag, refused with "CSRF Failed: CSRF token from the 'X-Csrftoken' HTTP header incorrect." until it was
reloaded); signed out, it says so in words, not "Authentication credentials were not provided."."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation
from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up, _wait
from tests.ui.test_browser_pin import _press_pin, _sections
from tests.ui.test_browser_sidebar_rename import _chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _sign_out_in_another_tab(browser, base: str) -> str:
    """Signs out in a new tab and stays there, on the sign-in page; returns the first tab's handle."""
    left_open = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(f"{base}/settings/")
    browser.find_element(By.CSS_SELECTOR, "form[action='/accounts/logout/'] button").click()
    _wait(browser, lambda d: d.find_elements(By.NAME, "password"))
    return left_open


def test_a_page_left_open_works_after_signing_in_again_in_another_tab(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "two-tabs")
    trip = _chat("two-tabs", "Lisbon trip")
    browser.get(f"{asgi_server.url}/c/new/")
    left_open = _sign_out_in_another_tab(browser, asgi_server.url)
    browser.find_element(By.NAME, "username").send_keys("two-tabs")
    browser.find_element(By.NAME, "password").send_keys("Browser-test-pass-42")
    browser.find_element(By.CSS_SELECTOR, ".auth-form button[type=submit]").click()
    _wait(browser, lambda d: d.find_elements(By.ID, "composer-input"))
    browser.switch_to.window(left_open)

    _press_pin(browser, trip)

    _wait(browser, lambda d: _sections(d) == [("Pinned", ["Lisbon trip"])])
    assert Conversation.objects.get(pk=trip.pk).pinned_at is not None
    assert [e for e in console_errors(browser) if "403" in e["message"]] == []


def test_a_page_left_open_after_signing_out_in_another_tab_says_so(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "gone-tab")
    trip = _chat("gone-tab", "Lisbon trip")
    browser.get(f"{asgi_server.url}/c/new/")
    browser.switch_to.window(_sign_out_in_another_tab(browser, asgi_server.url))

    _press_pin(browser, trip)

    said = "You are signed out (in another tab, or your session ended): reload the page to sign in again."
    _wait(browser, lambda d: said in [t.text for t in d.find_elements(By.CSS_SELECTOR, "#toasts .toast")])
    assert Conversation.objects.get(pk=trip.pk).pinned_at is None
