"""What a form post's page says on arrival (Settings' "Preferences saved", a warning that a model's host
does not resolve, a refused token name; "Your account was deleted" on the sign-in page) is read out by a
screen reader. It was drawn inside the toasts' live region as the page loaded, and a screen reader reads
a live region's changes, never what it held from the start: the words were shown, never said, and were
gone (faded) 4.5 s later."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from tests.support.browser import HEAR_LIVE_REGIONS, console_errors
from tests.ui.test_a11y import _login
from tests.ui.test_browser import _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_saved_form_s_words_are_said_after_the_page_loads(live_server, browser):
    user = get_user_model().objects.create_user(username="listener", password="A-long-enough-pass-42")
    _login(browser, live_server.url, user)
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HEAR_LIVE_REGIONS})
    browser.get(f"{live_server.url}/settings/")
    browser.find_element(By.ID, "prefs-save").click()

    words = "Preferences saved. They apply to your next message."
    _wait(browser, lambda d: words in d.find_element(By.ID, "toasts").text)  # shown, in the live region
    said = browser.execute_script("return window.__said")
    heard = [state for state, text in said if words in text]
    assert heard and "loading" not in heard, said  # said as a change, once the page is up
    # It fades as before, from the region and the page.
    _wait(browser, lambda d: words not in d.find_element(By.TAG_NAME, "body").text, timeout=10)
    assert console_errors(browser) == []
