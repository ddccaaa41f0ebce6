"""A reply's boxes that scroll sideways (a display formula, a code block, a table), by keyboard and by
screen reader: each is a tab stop with a name, so a keyboard user can scroll it and a screen reader
says what took the focus. An inline formula in a line of text is not one (a paragraph may hold dozens)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Conversation, Message
from tests.support.browser import console_errors
from tests.ui.test_a11y import _axe_source, _run_axe
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_SUM = "+".join(f"a_{{{i}}}" for i in range(90))
COLUMNS = [f"column {i}" for i in range(14)]
REPLY = (
    f"Short $E = mc^2$ inline.\n\nThe whole sum:\n\n$${LONG_SUM}$$\n\n"
    "```python\nx = " + " + ".join(f"value_{i}" for i in range(60)) + "\n```\n\n"
    f"| {' | '.join(COLUMNS)} |\n|{'---|' * 14}\n| {' | '.join(COLUMNS)} |\n"
)


def _open_reply(browser, base: str, username: str) -> None:
    _sign_up(browser, base, username)
    user = get_user_model().objects.get(username=username)
    conversation = Conversation.objects.create(owner=user, title="Wide things")
    question = Message.objects.create(conversation=conversation, role="user", content="Show me wide things")
    Message.objects.create(conversation=conversation, role="assistant", content=REPLY, parent=question)
    browser.set_window_size(700, 860)
    browser.get(f"{base}/c/{conversation.pk}/")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant .code-block pre"))


def test_a_wide_display_formula_is_a_named_tab_stop_the_arrow_keys_scroll(asgi_server, browser):
    _open_reply(browser, asgi_server.url, "wide-keys")
    formula = browser.find_element(By.CSS_SELECTOR, ".msg--assistant .math.block")
    assert browser.execute_script("return arguments[0].scrollWidth > arguments[0].clientWidth", formula)

    # Shift+Tab from the copy button of the code block just after it lands on the formula's box.
    copy = browser.find_element(By.CSS_SELECTOR, ".msg--assistant .code-block .copy-btn")
    browser.execute_script("arguments[0].focus()", copy)
    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
    _wait(browser, lambda d: d.switch_to.active_element == formula)
    assert formula.accessible_name == "Formula"
    assert browser.execute_script("return getComputedStyle(arguments[0]).outlineStyle", formula) != "none"
    formula.send_keys(Keys.ARROW_RIGHT)
    _wait(browser, lambda d: d.execute_script("return arguments[0].scrollLeft", formula) > 0)

    # The code block and the table are tab stops with names as well; the short inline formula is none.
    code = browser.find_element(By.CSS_SELECTOR, ".msg--assistant pre")
    table = browser.find_element(By.CSS_SELECTOR, ".msg--assistant table")
    stops = browser.execute_script(
        "return [...arguments].map((node) => node.tabIndex)", formula, code, table)
    assert stops == [0, 0, 0]
    # A table is announced as one by its own role (a name "Table" would only say it twice).
    assert (code.accessible_name, table.aria_role) == ("Code", "table")
    assert browser.find_element(By.CSS_SELECTOR, ".msg--assistant .math.inline").get_attribute("tabindex") is None
    assert console_errors(browser) == []


def test_a_reply_of_wide_boxes_passes_axe(asgi_server, browser):
    source = _axe_source()
    _open_reply(browser, asgi_server.url, "wide-axe")
    found = [v for v in _run_axe(browser, source)
             if v["id"] in {"scrollable-region-focusable", "aria-prohibited-attr", "aria-allowed-role"}]
    assert found == []


def test_a_code_block_shows_that_it_has_the_focus(asgi_server, browser):
    """A code block sits in a box with its header that clips what overflows it (its rounded corners):
    the focus ring, drawn around the block's outside edge, was clipped but for a line under the
    header. The ring is drawn inside the block's edge, where the box shows it."""
    _open_reply(browser, asgi_server.url, "code-ring")
    block = browser.find_element(By.CSS_SELECTOR, ".msg--assistant .code-block")
    copy = block.find_element(By.CSS_SELECTOR, ".copy-btn")
    pre = block.find_element(By.CSS_SELECTOR, "pre")
    browser.execute_script("arguments[0].focus()", copy)
    ActionChains(browser).send_keys(Keys.TAB).perform()
    _wait(browser, lambda d: d.switch_to.active_element == pre)
    ring = browser.execute_script("""
        const style = getComputedStyle(arguments[0]);
        return [getComputedStyle(arguments[1]).overflow, style.outlineStyle,
                parseFloat(style.outlineOffset) + parseFloat(style.outlineWidth), style.boxShadow];""", pre, block)
    assert ring[:2] == ["hidden", "solid"]
    assert ring[2] <= 0  # how far the ring reaches past the block's edge, where the box clips it
    assert "inset" in ring[3] or ring[3] == "none"
