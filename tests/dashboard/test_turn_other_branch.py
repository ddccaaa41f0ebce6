""""What the model saw" of a turn whose reply is on another branch says so, as the requests table does:
after a switch back to an earlier version, the page opens on the newest turn, another branch's, beside
a map and a usage card of the path shown."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.dashboard.factories import make_conversation, make_message, make_record, sent_entry
from tests.dashboard.test_browser import _login, _wait_ready
from tests.support.browser import browser, console_errors
from tests.ui.test_browser import _wait

__all__ = ["browser"]


def _switched_back(user):
    """A question answered twice (a regenerate), then switched back to the first answer."""
    c = make_conversation(owner=user, title="Switched back")
    question = make_message(conversation=c, content="which tent?")
    first = make_message(conversation=c, role="assistant", content="the first answer")
    again = make_message(conversation=c, role="assistant", content="the answer again", superseded=True)
    shown = make_record(conversation=c, tokens_full=40, tokens_sent=40, reply=first,
                        sent=[sent_entry("verbatim", question)])
    other = make_record(conversation=c, tokens_full=40, tokens_sent=40, reply=again,
                        sent=[sent_entry("verbatim", question)])
    return c, shown, other


@pytest.mark.django_db
def test_the_turn_api_says_whether_its_reply_is_on_the_path_shown(owner_client, user):
    c, shown, other = _switched_back(user)
    base = f"/api/dashboard/conversations/{c.pk}/records/"
    assert owner_client.get(f"{base}{shown.pk}/").json()["record"]["on_active_path"] is True
    assert owner_client.get(f"{base}{other.pk}/").json()["record"]["on_active_path"] is False
    # as the list says it
    assert [r["on_active_path"] for r in owner_client.get(base).json()["results"]] == [True, False]


@pytest.mark.browser
def test_the_turn_view_marks_a_turn_of_another_branch(live_server, transactional_db, browser, user):
    c, _, other = _switched_back(user)
    _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{c.pk}/dashboard/")
    _wait_ready(browser)
    # The page opens on the newest turn: the regeneration switched away from.
    assert browser.find_element(By.ID, "sent-list").get_attribute("data-record") == str(other.pk)
    _wait(browser, lambda d: "On another branch" in d.find_element(By.ID, "turn-view").text)
    browser.find_element(By.CSS_SELECTOR, "[data-turn=prev]").click()
    _wait(browser, lambda d: d.find_element(By.ID, "sent-list").get_attribute("data-record") != str(other.pk))
    assert "On another branch" not in browser.find_element(By.ID, "turn-view").text
    assert console_errors(browser) == []
