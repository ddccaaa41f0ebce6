"""Text files attached to a message in the browser: the paperclip, a file dropped on the message box, a
pasted one. The file's text goes into the box, named and fenced, and is sent as typed text is; a file
that is not UTF-8 text, or would take the message past its limit, is refused by name, the box untouched."""

from __future__ import annotations

import pytest
from django.test import override_settings
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# A file whose text holds a fence of its own: the block around it must take a longer one.
SOURCE = 'def greet():\n    """Say hello."""\n    return "```not a fence end```"\n'

# A File made in the page, given to the box as a drop (or a paste) from the desktop would give it.
DROP = """
const [name, bytes, kind, event] = arguments;
const file = new File([new Uint8Array(bytes)], name, {type: "text/plain"});
const data = new DataTransfer();
data.items.add(file);
const target = document.getElementById(kind === "paste" ? "composer-input" : kind === "drop" ? "composer" : "timeline");
if (kind === "paste") {
  target.dispatchEvent(new ClipboardEvent("paste", {clipboardData: data, bubbles: true, cancelable: true}));
} else {
  for (const type of ["dragover", "drop"]) {
    target.dispatchEvent(new DragEvent(type, {dataTransfer: data, bubbles: true, cancelable: true}));
  }
}
"""


def _box(driver):
    return driver.find_element(By.ID, "composer-input").get_attribute("value")


def _error(driver):
    found = driver.find_elements(By.ID, "composer-error")
    return found[0].text if found else ""


def test_a_file_chosen_with_the_paperclip_is_sent_named_and_fenced(asgi_server, browser, fake_openai, tmp_path):
    _sign_up_with_model(browser, asgi_server.url, "attach-clip", fake_url=fake_openai.base_url, model="fake-echo",
                        name="Echo")
    path = tmp_path / "greet.py"
    path.write_text(SOURCE, encoding="utf-8")
    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys("Why does this fail?")
    assert browser.find_element(By.ID, "attach-btn").get_attribute("aria-label") == "Attach images or text files"

    browser.find_element(By.ID, "attach-input").send_keys(str(path))

    expected = f"Why does this fail?\n\nFile: greet.py\n````py\n{SOURCE.rstrip()}\n````"
    _wait(browser, lambda d: _box(d).strip() == expected)
    status = browser.find_element(By.ID, "stream-status")
    said = f"Attached greet.py ({len(SOURCE)} characters) to your message."
    _wait(browser, lambda d: status.get_attribute("textContent") == said)
    composer.send_keys(Keys.ENTER)

    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))
    assert fake_openai.completions[-1].messages[-1] == {"role": "user", "content": expected}
    assert browser.find_elements(By.CSS_SELECTOR, ".msg--user .msg-source")[-1].get_attribute("value") == expected


def test_a_dropped_file_lands_at_the_cursor_and_a_binary_one_is_refused(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "attach-drop", fake_url=fake_openai.base_url, model="fake-echo",
                        name="Echo")
    browser.find_element(By.ID, "composer-input").send_keys("Before.After.")
    browser.execute_script("const b = document.getElementById('composer-input'); b.focus(); b.setSelectionRange(7, 7);")

    browser.execute_script(DROP, "notes.md", list(b"# Plan\n\nShip it.\n"), "drop")
    _wait(browser, lambda d: _box(d) == "Before.\n\nFile: notes.md\n```md\n# Plan\n\nShip it.\n```\n\nAfter.")

    # Beside the box (on the messages) too: the browser would open the file in the chat's place.
    browser.execute_script(DROP, "photo.png", [137, 80, 78, 71, 0, 0, 0, 13], "drop-beside")
    _wait(browser, lambda d: _error(d) == "photo.png is not a text file.")
    browser.execute_script(DROP, "latin1.txt", list("café".encode("latin-1")), "paste")
    _wait(browser, lambda d: "latin1.txt is not UTF-8 text" in _error(d))
    assert _box(browser) == "Before.\n\nFile: notes.md\n```md\n# Plan\n\nShip it.\n```\n\nAfter."


@override_settings(MAX_MESSAGE_CHARS=60)
def test_a_file_that_would_pass_the_message_limit_is_refused(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "attach-limit", fake_url=fake_openai.base_url, model="fake-echo",
                        name="Echo")
    browser.find_element(By.ID, "composer-input").send_keys("Read this.")

    browser.execute_script(DROP, "log.txt", list(b"error " * 20), "paste")

    _wait(browser, lambda d: "log.txt would make this message" in _error(d))
    assert "the limit is 60" in _error(browser)
    assert _box(browser) == "Read this."


def test_a_file_chosen_with_the_paperclip_lands_at_the_cursor(asgi_server, browser, fake_openai, tmp_path):
    """Chosen with the paperclip, a file went to the end of the message, not where the cursor was: the
    box's cursor was read only while the box held the focus, and the paperclip pressed had taken it."""
    _sign_up_with_model(browser, asgi_server.url, "attach-clip-cursor", fake_url=fake_openai.base_url,
                        model="fake-echo", name="Echo")
    path = tmp_path / "notes.md"
    path.write_bytes(b"# Plan\n\nShip it.\n")
    browser.find_element(By.ID, "composer-input").send_keys("Before.After.")
    browser.execute_script("document.getElementById('composer-input').setSelectionRange(7, 7)")
    browser.find_element(By.ID, "attach-btn").send_keys("")  # the focus on the paperclip, as pressing it leaves it

    browser.find_element(By.ID, "attach-input").send_keys(str(path))

    _wait(browser, lambda d: "notes.md" in _box(d))
    assert _box(browser) == "Before.\n\nFile: notes.md\n```md\n# Plan\n\nShip it.\n```\n\nAfter."


def test_after_a_long_file_the_box_shows_the_cursor(asgi_server, browser, fake_openai):
    """After a long file (a log of 400 lines) the box showed its first lines: the cursor, after the file
    where the question goes, was out of view until a key was typed."""
    _sign_up_with_model(browser, asgi_server.url, "attach-long-cursor", fake_url=fake_openai.base_url,
                        model="fake-echo", name="Echo")
    browser.find_element(By.ID, "composer-input").send_keys("What went wrong here?")

    browser.execute_script(DROP, "server.log", list(b"GET /health 200 OK in 3 ms\n" * 400), "paste")

    box = browser.find_element(By.ID, "composer-input")
    _wait(browser, lambda d: "server.log" in _box(d))
    cursor, length, below = browser.execute_script(
        "const b = arguments[0];"
        "return [b.selectionStart, b.value.length, b.scrollHeight - b.scrollTop - b.clientHeight]", box)
    assert cursor == length
    assert below <= 1
