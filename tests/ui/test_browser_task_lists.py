"""A reply's GFM task list in the browser: checkboxes a screen reader names by their items' words,
that cannot be changed, and that pass axe."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation, Message
from tests.support.browser import console_errors
from tests.ui.test_a11y import _axe_source, _run_axe
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _reply_boxes(browser, url: str, *, username: str, title: str, question: str, reply: str) -> list:
    """A new user's chat whose reply is `reply`, opened: the reply's checkboxes, once drawn."""
    _sign_up(browser, url, username)
    conversation = Conversation.objects.create(owner=get_user_model().objects.get(username=username), title=title)
    asked = Message.objects.create(conversation=conversation, role="user", content=question)
    Message.objects.create(conversation=conversation, role="assistant", parent=asked, content=reply)
    browser.get(f"{url}/c/{conversation.pk}/")
    return _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant input[type=checkbox]"))


def test_a_task_list_is_checkboxes_named_by_their_items(asgi_server, browser):
    source = _axe_source()
    boxes = _reply_boxes(browser, asgi_server.url, username="task-lists", title="Plan", question="A plan, please",
                         reply="The plan:\n\n- [x] read the **docs**\n- [ ] write the tests\n- a note\n")
    assert [(box.accessible_name, box.is_selected(), box.is_enabled()) for box in boxes] == [
        ("read the docs", True, False), ("write the tests", False, False)]
    boxes[1].find_element(By.XPATH, "..").click()  # its words: nothing changes
    assert not boxes[1].is_selected()
    # The box stands where the item's bullet would, beside its words and inside the reply's column.
    place = browser.execute_script(
        "const box = arguments[0].getBoundingClientRect(), item = arguments[0].closest('li').getBoundingClientRect();"
        "return [box.left >= arguments[0].closest('.md').getBoundingClientRect().left, box.right <= item.left + 4]",
        boxes[1])
    assert place == [True, True]
    found = [v["id"] for v in _run_axe(browser, source)
             if v["id"] in {"label", "color-contrast"} or v["id"].startswith("aria-")]
    assert found == []
    assert console_errors(browser) == []


CONTRAST = """
const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
const lum = (c) => {
  const f = (v) => { v /= 255; return v <= .03928 ? v / 12.92 : ((v + .055) / 1.055) ** 2.4; };
  const [r, g, b] = rgb(c); return .2126 * f(r) + .7152 * f(g) + .0722 * f(b);
};
const ratio = (c, bg) => {
  if (rgb(c).length > 3 && rgb(c)[3] === 0) return 1;  // transparent: the background itself
  const [x, y] = [lum(c), lum(bg)].sort((p, q) => q - p); return (x + .05) / (y + .05);
};
const bg = getComputedStyle(document.body).backgroundColor;
const [done, todo] = arguments;
return [ratio(getComputedStyle(done).backgroundColor, bg), ratio(getComputedStyle(todo).borderTopColor, bg)];
"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_task_lists_boxes_are_seen_and_numbers_kept(asgi_server, browser, scheme):
    """The browser's own disabled checkboxes are pale grey: on the light theme a ticked one could hardly
    be told from an empty one. The boxes are drawn at 3:1 against the page, as a control must be
    (WCAG 1.4.11). An ordered list's task items keep their numbers (only bullets make way for the box)."""
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                            {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    boxes = _reply_boxes(browser, asgi_server.url, username=f"task-boxes-{scheme}", title="Steps",
                         question="Steps, please", reply="1. [x] first step\n2. [ ] second step\n3. a note\n")
    fill, edge = browser.execute_script(CONTRAST, *boxes)
    assert fill >= 3 and edge >= 3
    numbers = browser.execute_script("return [...document.querySelectorAll('.msg--assistant ol > li')]"
                                     ".map((li) => getComputedStyle(li).listStyleType)")
    assert numbers == ["decimal", "decimal", "decimal"]


def test_a_loose_task_lists_boxes_stand_where_the_bullets_would(asgi_server, browser):
    """Items apart by blank lines hold their words in a paragraph: their boxes stood inside the text
    column, the bullets gone, where a tight list's stand in the bullets' place."""
    boxes = _reply_boxes(browser, asgi_server.url, username="task-loose", title="Loose", question="A plan",
                         reply="- [x] first, said at length\n\n- [ ] second\n")
    assert browser.execute_script("return arguments[0].closest('p') !== null", boxes[0])  # a loose list
    outside = browser.execute_script(
        "return [...arguments].map((box) => box.getBoundingClientRect().right"
        " <= box.closest('li').getBoundingClientRect().left + 4)", *boxes)
    assert outside == [True, True]
