"""On a tablet the sidebar shows beside the chat, so the chat's column is as narrow as a phone's screen:
its header follows the column's width (a container query in css/app.css), not the screen's. Between 761
and about 900 px the title was 0 px wide and the page scrolled sideways; with the offline model's chip
the same happened up to about 1000 px."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _menu_dialog, _send, _sign_up, _sign_up_with_model, _wait
from tests.ui.test_browser_phone_header import NAME_CLIPPED, RECT

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRIP = "Plan a three day hiking trip in the Dolomites for late September"  # a title longer than its room
NO_SIDEWAYS_SCROLL = "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def _resize(browser, width: int) -> None:
    browser.set_window_size(width, 900)
    _wait(browser, lambda d: d.execute_script("return innerWidth") == width)
    browser.refresh()


def _inside(browser, element_id: str, width: int) -> dict:
    spot = browser.execute_script(RECT, browser.find_element(By.ID, element_id))
    assert spot["left"] >= 0 and spot["right"] <= width, (width, element_id, spot)
    return spot


def _header_reads(browser, width: int) -> None:
    title = browser.find_element(By.ID, "chat-title")
    assert title.rect["width"] >= 80, (width, title.rect)
    assert browser.execute_script(NO_SIDEWAYS_SCROLL), width
    assert browser.find_element(By.ID, "sidebar").is_displayed()


@pytest.mark.parametrize("width", [768, 800, 860, 1366])
def test_a_tablet_shows_the_title_and_the_models_name_beside_the_sidebar(asgi_server, browser, fake_openai, width):
    _sign_up_with_model(browser, asgi_server.url, f"tablet-{width}", fake_url=fake_openai.base_url,
                        model="fake-echo", name="Llama 3.1 8B Instruct")
    _send(browser, TRIP)
    _resize(browser, width)
    _wait(browser, lambda d: "/" in d.find_element(By.ID, "gauge-text").text)
    _header_reads(browser, width)
    assert browser.execute_script(NAME_CLIPPED) <= 0
    for tool in ("model-select", "gauge", "conv-menu-btn"):
        _inside(browser, tool, width)

    # The gauge's panel opens in view, under the header, the gauge still uncovered.
    browser.find_element(By.ID, "gauge").click()
    panel = browser.find_element(By.ID, "gauge-pop")
    _wait(browser, lambda d: panel.is_displayed())
    spot = _inside(browser, "gauge-pop", width)
    assert spot["top"] >= browser.execute_script(RECT, browser.find_element(By.ID, "gauge"))["bottom"]
    assert spot["bottom"] <= browser.execute_script("return innerHeight")
    browser.find_element(By.ID, "gauge").click()
    _wait(browser, lambda d: not panel.is_displayed())

    # The chat's menu and the dialog it opens are in view too.
    dialog = _menu_dialog(browser, "edit-system-prompt", "system-prompt-dialog")
    _inside(browser, "system-prompt-dialog", width)
    dialog.find_element(By.ID, "system-prompt-text").send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: dialog.get_attribute("open") is None)
    assert console_errors(browser) == []


@pytest.mark.parametrize("width", [800, 900, 1024])
def test_a_tablet_shows_the_title_beside_the_offline_models_chip(asgi_server, browser, width):
    # The offline chip is wider than a model's menu ("— add a model in Settings" beside it on a wide column).
    _sign_up(browser, asgi_server.url, f"tablet-offline-{width}")
    _send(browser, TRIP)
    _resize(browser, width)
    _wait(browser, lambda d: "/" in d.find_element(By.ID, "gauge-text").text)
    _header_reads(browser, width)
    chip = browser.find_element(By.CSS_SELECTOR, ".model-chip--offline")
    assert "Offline demo model" in chip.text
    assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth",
                                  chip.find_element(By.CSS_SELECTOR, ".model-chip-text"))
    _inside(browser, "conv-menu-btn", width)
    assert console_errors(browser) == []
