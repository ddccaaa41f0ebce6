"""A streaming reply is drawn as Markdown while it streams, not only once complete (markup events,
static/js/chat/progressive.js): its bold and its list appear while it is still being written, and the
words after the last drawing go on at the end of its last block."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reply_is_drawn_as_markdown_while_it_streams(asgi_server, browser, fake_openai):
    # Some thirty chunks 80 ms apart: the echo of the question below, bold and all.
    _sign_up_with_model(browser, asgi_server.url, "markup-live", fake_url=fake_openai.base_url, model="slow-80",
                        name="Slow")
    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys("Please write **bold words** and then many more plain words for the rest", Keys.ENTER)

    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant"))[-1]
    strong = _wait(browser, lambda d: reply.find_elements(By.CSS_SELECTOR, ".msg-content strong"))
    # drawn before the end
    assert "is-streaming" in browser.find_element(By.ID, "app").get_attribute("class")
    assert reply.get_attribute("data-status") is None
    assert strong[0].text == "bold words"
    content = reply.find_element(By.CSS_SELECTOR, ".msg-content")
    assert "is-plain" not in content.get_attribute("class")

    _wait(browser, lambda d: reply.get_attribute("data-status") == "complete")
    assert content.find_element(By.CSS_SELECTOR, "strong").text == "bold words"
    assert content.text.endswith("plain words for the rest")
    assert console_errors(browser) == []


# Records, at each change of the streaming reply, its first paragraph's text and its code block's.
WATCH_BLOCKS = """
window.__blocks = [];
const target = document.getElementById('messages');
new MutationObserver(() => {
  const content = target.querySelector('.msg--assistant.is-streaming .msg-content');
  const p = content && content.querySelector('p');
  const code = content && content.querySelector('pre code');
  if (p) window.__blocks.push([p.textContent, code ? code.textContent : null]);
}).observe(target, {subtree: true, childList: true, characterData: true});
"""

CODE = "total = first + second\nscale = total * factor / count\nlabel = name + suffix\nvalue = label + total + scale\n"


def test_the_words_after_a_drawing_go_on_where_the_text_does(asgi_server, browser, fake_openai):
    """The rendering trims a paragraph's last space and ends a code block with a line break: the words
    streamed after each drawing ran into the last one ("onetwo") and a code line's rest went on below it
    ("total = \\nfirst"), until the next drawing put them right."""
    _sign_up_with_model(browser, asgi_server.url, "markup-tails", fake_url=fake_openai.base_url, model="verbatim-50",
                        name="Verbatim")
    paragraph = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
    browser.execute_script(WATCH_BLOCKS)
    lines = [paragraph, "", "```python", *CODE.splitlines(), "```"]
    box = browser.find_element(By.ID, "composer-input")
    for line in lines:
        box.send_keys(line, Keys.SHIFT, Keys.ENTER)
    box.send_keys(Keys.ENTER)

    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant"))[-1]
    _wait(browser, lambda d: reply.get_attribute("data-status") == "complete")
    assert reply.find_element(By.CSS_SELECTOR, ".msg-content p").text == paragraph
    assert reply.find_element(By.CSS_SELECTOR, ".msg-content pre code").get_attribute("textContent") == CODE
    seen = browser.execute_script("return window.__blocks")
    # drawn mid-paragraph and mid-line at least once (the model streams a word every 50 ms, drawings
    # come every 0.35 s)
    assert any(not p.endswith(("fifteen", "fifteen\n")) for p, _ in seen)
    assert any(code and not code.endswith("\n") for _, code in seen)
    # the paragraph goes on with the text after it (the fence, the code) until a drawing puts that in place
    words = " ".join(" ".join(lines).split())
    assert [p for p, _ in seen if not words.startswith(" ".join(p.split()))] == []
    # (the closing fence, the last word, shows in the code until the reply's end draws it whole)
    assert [code for _, code in seen if code is not None and not CODE.startswith(code.removesuffix("```"))] == []
    assert console_errors(browser) == []


def test_a_reply_drawn_taller_at_its_end_keeps_its_end_in_view(asgi_server, browser, fake_openai):
    """The page followed a streaming reply only while its end stayed within 160px of the view, checked
    after each change: the reply drawn whole at its end (each code block given its header and Copy
    button) grew past that at once, and the page stayed where it was, the reply's last lines and its
    actions out of view, with no jump button."""
    _sign_up_with_model(browser, asgi_server.url, "markup-end-in-view", fake_url=fake_openai.base_url,
                        model="verbatim-20", name="Verbatim")
    blocks = [f"```python\nprint({i})\nx = {i}\n```" for i in range(8)]
    box = browser.find_element(By.ID, "composer-input")
    for line in ["Eight blocks:", "", *"\n\n".join(blocks).splitlines(), "", "The last words."]:
        box.send_keys(line, Keys.SHIFT, Keys.ENTER)
    box.send_keys(Keys.ENTER)

    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant"))[-1]
    _wait(browser, lambda d: reply.get_attribute("data-status") == "complete")
    assert len(reply.find_elements(By.CSS_SELECTOR, '[data-action="copy-code"]')) == 8
    below = browser.execute_script(
        "const t = document.getElementById('timeline'); return t.scrollHeight - t.scrollTop - t.clientHeight")
    assert below <= 1
    assert console_errors(browser) == []
