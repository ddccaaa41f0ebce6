"""Keyboard shortcuts and the screen-reader basics of a streamed reply (issue 13, item 5), in
headless Chromium: the "?" dialog, new chat, focus the composer, ↑ opens the last message for editing
in place, copy the last reply; the reply is aria-busy while it streams and #stream-status says when it ends."""

from __future__ import annotations

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _send, _sign_up, _wait

# Records every message that was marked busy while the reply streamed.
WATCH_BUSY = """
window.__busy = [];
new MutationObserver((records) => {
  for (const r of records) {
    const busy = r.target.getAttribute && r.target.getAttribute('aria-busy') === 'true';
    if (busy) window.__busy.push(r.target.dataset.role);
  }
}).observe(document.getElementById('messages'), {attributes: true, attributeFilter: ['aria-busy'], subtree: true});
"""


def _chord(browser, *keys):
    actions = ActionChains(browser)
    for key in keys[:-1]:
        actions.key_down(key)
    actions.send_keys(keys[-1])
    for key in reversed(keys[:-1]):
        actions.key_up(key)
    actions.perform()


def _active_id(browser) -> str:
    return browser.execute_script("return document.activeElement && document.activeElement.id")


def test_shortcuts_dialog_and_keys(asgi_server, browser):
    base = asgi_server.url
    _sign_up(browser, base, "browser-keys")
    # the composer has the focus on load
    _wait(browser, lambda d: _active_id(d) == "composer-input")

    # The reply is marked busy while it streams, not read token by token; the status says it ended.
    browser.execute_script(WATCH_BUSY)
    reply = _send(browser, "Remember the number 4711.")
    assert reply.get_attribute("data-status") == "complete"
    assert "assistant" in browser.execute_script("return window.__busy")
    assert reply.get_attribute("aria-busy") is None
    status = browser.find_element(By.ID, "stream-status")
    assert (status.get_attribute("aria-live"), status.get_attribute("role")) == ("polite", "status")
    _wait(browser, lambda d: status.get_attribute("textContent") == "Reply complete.")

    # "?" outside a text field opens the list; Esc closes it.
    browser.find_element(By.ID, "timeline").click()
    ActionChains(browser).send_keys("?").perform()
    dialog = browser.find_element(By.ID, "shortcuts-dialog")
    _wait(browser, lambda d: dialog.get_attribute("open") is not None)
    assert browser.find_element(By.ID, dialog.get_attribute("aria-labelledby")).text == "Keyboard shortcuts"
    assert "Edit your last message in place" in dialog.text
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    _wait(browser, lambda d: dialog.get_attribute("open") is None)
    # and from the sidebar's button
    browser.find_element(By.CSS_SELECTOR, '.sidebar [data-action="shortcuts"]').click()
    _wait(browser, lambda d: dialog.get_attribute("open") is not None)
    dialog.find_element(By.CSS_SELECTOR, "button[value=close]").click()
    _wait(browser, lambda d: dialog.get_attribute("open") is None)

    # Typing "?" in the composer types it.
    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys("?")
    assert composer.get_attribute("value") == "?" and dialog.get_attribute("open") is None
    composer.clear()

    # Shift+Esc focuses the composer from anywhere; ↑ in it, empty, opens the last message for editing
    # in place (issue 13: it used to bring the text back to resend); Esc closes the editor unchanged.
    browser.find_element(By.ID, "timeline").click()
    assert _active_id(browser) != "composer-input"
    _chord(browser, Keys.SHIFT, Keys.ESCAPE)
    _wait(browser, lambda d: _active_id(d) == "composer-input")
    composer.send_keys("x")
    composer.send_keys(Keys.ARROW_UP)  # not empty: the caret moves, nothing opens
    assert composer.get_attribute("value") == "x" and not browser.find_elements(By.CSS_SELECTOR, ".msg-edit")
    composer.clear()
    composer.send_keys(Keys.ARROW_UP)
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("class") == "msg-edit-input")
    editor = browser.switch_to.active_element
    assert editor.get_attribute("value") == "Remember the number 4711."
    assert composer.get_attribute("value") == ""
    editor.send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, ".msg-edit"))

    # Ctrl+Shift+C copies the last reply (headless Chromium may refuse the clipboard: the toast says which).
    _chord(browser, Keys.CONTROL, Keys.SHIFT, "c")
    _wait(browser, lambda d: any(
        t in d.find_element(By.ID, "toasts").text for t in ("Last reply copied", "Could not copy")))

    # Ctrl+Shift+O opens a new chat.
    _chord(browser, Keys.CONTROL, Keys.SHIFT, "o")
    _wait(browser, lambda d: d.current_url.rstrip("/").endswith("/c/new"))
    assert console_errors(browser) == []
