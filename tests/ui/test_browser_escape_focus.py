"""Esc stops a reply only when it is not doing something else; focus stays where a keyboard user is."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.support.chat import summarized_chat
from tests.ui.test_browser import _idle, _sign_up, _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _start_slow_reply(browser) -> None:
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("Tell me a long story")
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant[data-id].is-streaming"))


def _last_status(browser) -> str:
    _wait(browser, _idle, timeout=60)
    return browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status")


def test_esc_in_the_chats_search_clears_it_and_the_reply_goes_on(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "esc-search", fake_url=fake_openai.base_url,
                        model="slow-150", name="Slow")
    browser.get(asgi_server.url + "/c/new/")
    _start_slow_reply(browser)
    search = browser.find_element(By.ID, "chat-search")
    search.send_keys("story")
    search.send_keys(Keys.ESCAPE)

    assert _last_status(browser) == "complete"  # it was cut off and marked stopped


def test_on_a_phone_esc_closes_the_drawer_without_stopping_and_the_drawer_keeps_tab(asgi_server, browser,
                                                                                     fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "esc-drawer", fake_url=fake_openai.base_url,
                        model="slow-150", name="Slow")
    browser.set_window_size(375, 800)
    browser.get(asgi_server.url + "/c/new/")
    _start_slow_reply(browser)
    browser.find_element(By.CSS_SELECTOR, ".sidebar-toggle").click()
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "new-chat")
    # Tab from the drawer's last control does not reach the chat hidden behind the scrim
    assert browser.execute_script("return document.getElementById('main').inert") is True
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)

    _wait(browser, lambda d: "sidebar-open" not in d.find_element(By.ID, "app").get_attribute("class"))
    assert browser.execute_script("return document.getElementById('main').inert") is False
    assert _last_status(browser) == "complete"
    assert console_errors(browser) == []


def test_focus_goes_to_the_summary_after_saving_or_discarding_it(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "summary-keys")
    user = get_user_model().objects.get(username="summary-keys")
    conversation, summary = summarized_chat(user, covered_message_count=1204)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    marker = browser.find_element(By.ID, f"m-{summary.pk}")
    browser.execute_script("arguments[0].open = true", marker)
    marker.find_element(By.CSS_SELECTOR, '[data-action="edit-summary"]').click()
    area = _wait(browser, lambda d: d.find_element(By.ID, "summary-edit"))
    area.send_keys(" And a correction.")
    browser.find_element(By.CSS_SELECTOR, '#summary-dialog button[value="ok"]').click()

    def focused_marker(d):
        active = d.switch_to.active_element
        return active.tag_name == "summary" and active.find_element(By.XPATH, "..").get_attribute("data-id")

    edited = _wait(browser, focused_marker)  # it fell to <body>
    marker = browser.find_element(By.ID, f"m-{edited}")
    # the marker drawn by the page groups thousands as the server's does ("covers 1204 messages" before)
    assert "covers 1,204 messages" in marker.find_element(By.CSS_SELECTOR, ".summary-marker-meta").text
    browser.execute_script("arguments[0].open = true", marker)
    # from the keyboard (the saved toast covers the button for a pointer)
    discard = marker.find_element(By.CSS_SELECTOR, '[data-action="discard-summary"]')
    browser.execute_script("arguments[0].focus()", discard)
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    _wait(browser, lambda d: d.find_element(By.ID, "confirm-ok").is_displayed())
    browser.find_element(By.ID, "confirm-ok").send_keys(Keys.ENTER)
    _wait(browser, lambda d: "is-discarded" in d.find_element(By.ID, f"m-{edited}").get_attribute("class"))
    assert _wait(browser, focused_marker) == edited


def test_widening_the_window_with_the_drawer_open_leaves_the_chat_usable(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "drawer-wide")
    browser.set_window_size(375, 800)
    browser.get(asgi_server.url + "/c/new/")
    browser.find_element(By.CSS_SELECTOR, ".sidebar-toggle").click()
    _wait(browser, lambda d: d.execute_script("return document.getElementById('main').inert"))

    browser.set_window_size(1280, 800)  # the phone's drawer is the desktop's sidebar now: no way to close it

    _wait(browser, lambda d: d.execute_script("return document.getElementById('main').inert") is False)
    focused = browser.execute_script("const box = document.getElementById('composer-input'); box.focus();"
                                     "return document.activeElement === box;")
    assert focused is True


def test_on_a_phone_esc_in_the_search_clears_it_first_and_then_closes_the_drawer(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "esc-phone-search")
    browser.set_window_size(375, 800)
    browser.get(asgi_server.url + "/c/new/")
    browser.find_element(By.CSS_SELECTOR, ".sidebar-toggle").click()
    search = _wait(browser, lambda d: d.find_element(By.ID, "chat-search"))
    _wait(browser, lambda d: search.is_displayed())
    search.send_keys("budget")
    search.send_keys(Keys.ESCAPE)

    _wait(browser, lambda d: search.get_attribute("value") == "")
    # the same press closed the drawer too: the chats list went away with the search just cleared
    assert "sidebar-open" in browser.find_element(By.ID, "app").get_attribute("class")
    assert browser.switch_to.active_element == search
    search.send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: "sidebar-open" not in d.find_element(By.ID, "app").get_attribute("class"))
    assert console_errors(browser) == []


def test_on_a_phone_opening_the_drawer_moves_the_focus_into_it_at_once(asgi_server, browser):
    # It moved 50 ms later: a tap into the search in between lost its focus to "New chat", and the
    # Esc meant for the search closed the drawer instead.
    _sign_up(browser, asgi_server.url, "drawer-focus-now")
    browser.set_window_size(375, 800)
    browser.get(asgi_server.url + "/c/new/")

    focused = browser.execute_script(
        "document.querySelector('.sidebar-toggle').click(); return document.activeElement.id;")

    assert focused == "new-chat"
