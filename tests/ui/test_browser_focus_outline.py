"""The keyboard's place is drawn with an outline everywhere on the chat page, the one mark that survives
forced colours (Windows' contrast themes repaint borders, drop shadows and backgrounds): the fields (the
message box, search, the model menu) showed their focus only by a shadow and a border colour, and the
chat menu's links (Export) only by a background, so there the focus vanished."""

from __future__ import annotations

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _send, _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The element's own marks; with `arguments[0]`, its frame's where it has one (the message box's and the model
# menu's ring is drawn around them, on .composer and .model-select).
FOCUS_MARKS = """const e = document.activeElement;
const s = getComputedStyle(arguments[0] ? e.closest('.composer, .model-select') || e : e);
return [s.outlineStyle, parseFloat(s.outlineWidth), s.outlineColor, s.boxShadow];"""


def _transparent(colour: str) -> bool:
    return colour == "transparent" or colour.replace(" ", "").endswith(",0)") or colour.endswith("/ 0)")


def _marked(browser, forced: bool) -> bool:
    """The focus is drawn: with forced colours, by an outline (they repaint its colour, and drop shadows);
    otherwise by an outline that shows, or a field's shadow ring."""
    style, width, colour, shadow = browser.execute_script(FOCUS_MARKS, not forced)
    outline = style != "none" and width >= 2
    if forced:
        return outline
    return (outline and not _transparent(colour)) or (shadow != "none" and not _transparent(shadow.split(")")[0] + ")"))


def _forced_colours(browser, on: bool) -> None:
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
        {"name": "forced-colors", "value": "active" if on else "none"}]})


@pytest.mark.parametrize("forced", [False, True], ids=["colours", "forced-colours"])
def test_every_focus_on_the_chat_page_has_an_outline(asgi_server, browser, fake_openai, forced):
    _sign_up_with_model(browser, asgi_server.url, f"outline-{int(forced)}", fake_url=fake_openai.base_url,
                        model="fake-echo", name="Echo")  # a model of one's own: the model menu shows
    browser.get(f"{asgi_server.url}/")
    _send(browser, "A chat with menus.")
    _forced_colours(browser, forced)
    try:
        for field in ("composer-input", "chat-search", "model-select"):
            browser.execute_script("arguments[0].focus()", browser.find_element(By.ID, field))
            try:
                _wait(browser, lambda d: _marked(d, forced), timeout=5)  # a shadow ring comes in .15s
            except TimeoutException:
                pytest.fail(f"{field}: {browser.execute_script(FOCUS_MARKS, not forced)}")

        # The chat menu from the keyboard, down to its first link (Export as Markdown).
        menu = browser.find_element(By.ID, "conv-menu-btn")
        browser.execute_script("arguments[0].focus()", menu)
        ActionChains(browser).send_keys(Keys.ENTER).perform()
        _wait(browser, lambda d: menu.get_attribute("aria-expanded") == "true")
        for _ in range(12):
            if browser.switch_to.active_element.tag_name == "a":
                break
            ActionChains(browser).send_keys(Keys.ARROW_DOWN).perform()
        link = browser.switch_to.active_element
        assert link.tag_name == "a" and link.get_attribute("role") == "menuitem"
        _wait(browser, lambda d: _marked(d, forced), timeout=5)
    finally:
        _forced_colours(browser, False)
    assert console_errors(browser) == []
