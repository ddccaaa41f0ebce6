"""On a phone, a new chat's header shows the name of the model it will use: the gauge and the chat's
menu are not there yet, so the model menu has their room (it read "Mi…" for "Mirror")."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.support.browser import console_errors
from tests.ui.test_browser import _send, _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# How much of the selected model's name the menu leaves unshown, in CSS pixels.
NAME_CLIPPED = """
const select = document.getElementById('model-select');
const probe = document.createElement('span');
probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap;font:' + getComputedStyle(select).font;
probe.textContent = select.selectedOptions[0].textContent;
document.body.append(probe);
const room = select.clientWidth - parseFloat(getComputedStyle(select).paddingRight)
  - parseFloat(getComputedStyle(select).paddingLeft);
const clipped = probe.getBoundingClientRect().width - room;
probe.remove();
return clipped;
"""


def test_a_new_chat_on_a_phone_shows_its_models_name(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "phone-header", fake_url=fake_openai.base_url,
                        model="fake-echo", name="Mirror 8k")
    browser.set_window_size(390, 844)
    browser.get(asgi_server.url + "/c/new/")
    _wait(browser, lambda d: d.find_element(By.ID, "model-select").is_displayed())
    assert browser.execute_script(NAME_CLIPPED) <= 0
    title = browser.find_element(By.ID, "chat-title")
    assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth", title)
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 390

    # Once the chat exists, its gauge and menu come back into the header, which still fits the phone.
    _send(browser, "Hello")
    _wait(browser, lambda d: d.find_element(By.ID, "conv-tools").is_displayed())
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 390
    assert browser.find_element(By.ID, "conv-menu-btn").rect["x"] + 36 <= 390
    assert console_errors(browser) == []
