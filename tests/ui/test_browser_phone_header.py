"""On a phone, the chat header shows the name of the model a chat uses and the chat's title, each in a
row of its own (css/app.css, a chat column 680px wide or less; a tablet's: test_browser_tablet_header.py):
in a new chat (it read "Mi…" for "Mirror") and once the gauge and the chat's menu have come beside the
model menu (it read "Fa…"). A new chat's page names its model whole, wrapped within the screen."""

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


# Where an element is on screen, in CSS pixels.
RECT = ("const r = arguments[0].getBoundingClientRect();"
        "return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}")


def test_an_open_chat_on_a_phone_shows_its_models_name_and_its_title(asgi_server, browser, fake_openai):
    # With the gauge and the chat's menu beside them in one row, the model's name and the title were cut
    # to a few letters each; the header now gives them a row each. A desktop's header is one row, as before.
    _sign_up_with_model(browser, asgi_server.url, "phone-open-chat", fake_url=fake_openai.base_url,
                        model="fake-echo", name="Llama 3.1 8B Instruct")
    _send(browser, "Plan a three day hiking trip in the Dolomites for late September")
    _wait(browser, lambda d: "/" in d.find_element(By.ID, "gauge-text").text)
    header = browser.find_element(By.CSS_SELECTOR, ".topbar")
    desktop = browser.execute_script(RECT, header)
    assert desktop["bottom"] - desktop["top"] < 60  # one row
    chip = browser.find_element(By.CSS_SELECTOR, ".model-chip")
    assert browser.execute_script(RECT, chip)["top"] == browser.execute_script(RECT, browser.find_element(
        By.ID, "gauge"))["top"]

    browser.set_window_size(390, 844)
    browser.refresh()
    _wait(browser, lambda d: "/" in d.find_element(By.ID, "gauge-text").text)
    assert browser.execute_script(NAME_CLIPPED) <= 0
    title = browser.find_element(By.ID, "chat-title")
    assert title.rect["width"] >= 250, title.rect  # the title is read too, not cut to a word
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 390
    for tool in ("model-select", "gauge", "conv-menu-btn"):
        spot = browser.execute_script(RECT, browser.find_element(By.ID, tool))
        assert spot["left"] >= 0 and spot["right"] <= 390, (tool, spot)
    # The gauge's panel opens under the header, leaving the gauge itself in view.
    browser.find_element(By.ID, "gauge").click()
    panel = _wait(browser, lambda d: d.find_element(By.ID, "gauge-pop"))
    _wait(browser, lambda d: panel.is_displayed())
    spot = browser.execute_script(RECT, panel)
    header = browser.find_element(By.CSS_SELECTOR, ".topbar")
    assert spot["top"] >= browser.execute_script(RECT, header)["bottom"]
    assert spot["left"] >= 0 and spot["right"] <= 390

    # A narrower phone still fits the header, the gauge's figure on one line.
    browser.set_window_size(360, 740)
    _wait(browser, lambda d: d.execute_script("return innerWidth") == 360)
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 360
    gauge = browser.find_element(By.ID, "gauge")
    assert gauge.rect["height"] <= 34 and gauge.rect["x"] + gauge.rect["width"] <= 360
    assert browser.find_element(By.ID, "conv-menu-btn").rect["x"] + 36 <= 360
    assert console_errors(browser) == []


def test_a_new_chats_page_wraps_a_long_model_id_within_a_phones_screen(asgi_server, browser, fake_openai):
    model = "casperhansen/deepseek_r1_distill_qwen_32b_instruct_awq_4bit"  # a vLLM model id: no hyphen to wrap at
    _sign_up_with_model(browser, asgi_server.url, "phone-long-model", fake_url=fake_openai.base_url, model=model,
                        name="Lab_vLLM_DeepSeek_R1_Distill_32B")
    browser.set_window_size(390, 844)
    browser.get(asgi_server.url + "/c/new/")
    about = _wait(browser, lambda d: d.find_element(By.ID, "empty-model"))
    assert model in about.text
    # it ran past the screen's edge, the chat column scrolling sideways to read it
    assert browser.execute_script("return arguments[0].getBoundingClientRect().right <= innerWidth", about)
    assert browser.execute_script("return [...document.querySelectorAll('#empty-model *')]"
                                  ".every((e) => e.getBoundingClientRect().right <= innerWidth)")
    assert browser.execute_script("const m = document.getElementById('messages');"
                                  "return m.scrollWidth <= m.clientWidth")
