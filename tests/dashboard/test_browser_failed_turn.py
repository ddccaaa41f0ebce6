"""A turn whose reply failed says so on the dashboard, in the requests table, the turn's view, the
records API and both downloads."""

from __future__ import annotations

import csv
import io
import json

import pytest
from selenium.webdriver.common.by import By

from chatapp.chat.models import Message
from tests.dashboard.factories import make_conversation, make_message, make_record, sent_entry
from tests.dashboard.test_browser import _login, _wait_ready
from tests.support.browser import browser, console_errors
from tests.support.streaming import streamed_body
from tests.ui.test_browser import _wait

__all__ = ["browser"]

pytestmark = [pytest.mark.browser]


def _failed_second_turn(user):
    """Two turns on a local model (no usage reported): the first answered, the second's reply failed."""
    c = make_conversation(owner=user, title="Failing endpoint")
    first = make_message(conversation=c, content="first question")
    answer = make_message(conversation=c, role="assistant", content="an answer")
    second = make_message(conversation=c, content="second question")
    failed = make_message(conversation=c, role="assistant", content="", status=Message.Status.ERROR,
                          error="The model endpoint had an internal error (500).")
    make_record(conversation=c, tokens_full=40, tokens_sent=40, model="local-llama", reply=answer,
                sent=[sent_entry("verbatim", first)])
    make_record(conversation=c, tokens_full=90, tokens_sent=90, model="local-llama", reply=failed,
                sent=[sent_entry("verbatim", first, answer, second)])
    return c


def test_a_turn_whose_reply_failed_says_so(live_server, transactional_db, browser, user):
    """The failed turn read like the answered one (a "none" badge, its tokens, "—" for the provider's
    count, as for any endpoint that reports none): nothing said the request got no reply."""
    c = _failed_second_turn(user)
    client = _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{c.pk}/dashboard/")
    _wait_ready(browser)

    table = browser.find_elements(By.CSS_SELECTOR, "#records-table tbody tr")
    rows = {tr.get_attribute("data-turn"): tr.text for tr in table}
    assert "reply failed" in rows["2"] and "reply failed" not in rows["1"]
    # The mark goes under the strategy's where the column is narrow, not past the table's edge.
    assert browser.execute_script(
        "const w = document.querySelector('.dash-table-wrap'); return w.scrollWidth <= w.clientWidth")
    _wait(browser, lambda d: "Reply failed" in d.find_element(By.ID, "turn-view").text)

    listed = client.get(f"/api/dashboard/conversations/{c.pk}/records/").json()["results"]
    assert [r["reply_status"] for r in listed] == ["complete", "error"]
    text = streamed_body(client.get(f"/c/{c.pk}/dashboard/export.csv")).decode("utf-8-sig")
    assert [r["reply_status"] for r in csv.DictReader(io.StringIO(text))] == ["complete", "error"]
    records = json.loads(streamed_body(client.get(f"/c/{c.pk}/dashboard/export.json")))["records"]
    assert [r["reply_status"] for r in records] == ["complete", "error"]
    assert console_errors(browser) == []
