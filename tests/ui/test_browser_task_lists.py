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


def test_a_task_list_is_checkboxes_named_by_their_items(asgi_server, browser):
    source = _axe_source()
    _sign_up(browser, asgi_server.url, "task-lists")
    user = get_user_model().objects.get(username="task-lists")
    conversation = Conversation.objects.create(owner=user, title="Plan")
    question = Message.objects.create(conversation=conversation, role="user", content="A plan, please")
    Message.objects.create(conversation=conversation, role="assistant", parent=question,
                           content="The plan:\n\n- [x] read the **docs**\n- [ ] write the tests\n- a note\n")
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")

    boxes = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant input[type=checkbox]"))
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
