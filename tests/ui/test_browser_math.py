"""Math in a real browser: the server's MathML drawn by Chromium in the reply's column."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation, Message
from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FORMULAS = r"""The usual ones:

$$\sum_{i=1}^{n} i = \frac{n(n+1)}{2}$$

$$\int_{0}^{\infty} e^{-x^2} dx = \frac{\sqrt{\pi}}{2}$$

$$\lim_{x \to 0} \frac{\sin x}{x} = 1$$

$$\hat{x} + \vec{v}$$
"""


def test_a_display_formula_is_shown_whole(asgi_server, browser):
    """A display formula scrolls sideways in a box that hides what overflows it up or down; its padding
    was smaller than MathML's glyphs overflow their boxes: the tops of a root's bar, of ∞ over an
    integral, of an accent, and the bottoms of a fraction's denominator were cut off."""
    _sign_up(browser, asgi_server.url, "math-whole")
    user = get_user_model().objects.get(username="math-whole")
    conversation = Conversation.objects.create(owner=user, title="Formulas")
    question = Message.objects.create(conversation=conversation, role="user", content="Some formulas, please.")
    Message.objects.create(conversation=conversation, role="assistant", content=FORMULAS, parent=question)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")

    blocks = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant .math.block math"))
    assert len(blocks) == 4
    hidden = browser.execute_script(
        "return [...document.querySelectorAll('.math.block')].map((b) => b.scrollHeight - b.clientHeight)")
    assert hidden == [0, 0, 0, 0]
    assert console_errors(browser) == []


def test_a_long_inline_formula_scrolls_in_its_place_not_the_whole_chat(asgi_server, browser):
    """MathML does not wrap: an inline formula wider than the column stretched the timeline, which then
    scrolled sideways as a whole (the other messages with it), where a wide table or display formula
    scrolls in its own box. The formula keeps its place on the text's baseline."""
    _sign_up(browser, asgi_server.url, "math-inline-wide")
    user = get_user_model().objects.get(username="math-inline-wide")
    conversation = Conversation.objects.create(owner=user, title="Long sum")
    question = Message.objects.create(conversation=conversation, role="user", content="A long sum, please.")
    long_sum = "+".join(f"a_{{{i}}}" for i in range(120))
    Message.objects.create(conversation=conversation, role="assistant", parent=question,
                           content=f"Short $E = mc^2$ and long ${long_sum}$ in one line.")
    browser.set_window_size(420, 860)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")

    formulas = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant .math.inline math"))
    assert len(formulas) == 2
    timeline = browser.execute_script(
        "const t = document.getElementById('timeline'); return [t.scrollWidth, t.clientWidth]")
    assert timeline[0] == timeline[1]
    wide = browser.execute_script("const s = document.querySelectorAll('.math.inline')[1];"
                                  "return [s.scrollWidth > s.clientWidth, s.scrollHeight - s.clientHeight]")
    assert wide == [True, 0]  # it scrolls sideways itself, none of it cut off up or down
    # The short one stands where it stood: its "E" on the baseline of the words around it.
    shift = browser.execute_script("""
        const math = document.querySelector('.math.inline'), text = math.previousSibling;
        const range = document.createRange(); range.setStart(text, 0); range.setEnd(text, 1);
        const letter = math.querySelector('mi').getBoundingClientRect();
        return Math.round(letter.bottom - range.getBoundingClientRect().bottom);""")
    assert abs(shift) <= 5
    assert console_errors(browser) == []
