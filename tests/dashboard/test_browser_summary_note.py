"""The dashboard's summaries card says why a summary was written without the model."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from chatapp.chat.models import SummaryJob
from tests.dashboard.factories import make_conversation, make_job, make_message, make_record, make_summary, sent_entry
from tests.dashboard.test_browser import _login, _wait_ready
from tests.support.browser import browser, console_errors

__all__ = ["browser"]

pytestmark = [pytest.mark.browser]

FELL_BACK = ("The model failed 4 times (The model endpoint had an internal error (500). Retry in a moment.); "
             "an extractive summary was written instead.")


def test_an_extractive_summary_written_when_the_model_failed_says_so(live_server, transactional_db, browser, user):
    """It read "Extractive (no model)", as if no model had been set up: the failing model, which the
    job recorded, went unsaid."""
    conversation = make_conversation(owner=user, title="Fell back")
    chat = [make_message(conversation=conversation, role=("user", "assistant")[i % 2], content=f"message {i}")
            for i in range(6)]
    summary = make_summary(conversation=conversation, covers=(chat[0], chat[3]), covered=4, extractive=True,
                           model="extractive", content="[Conversation summary — covers messages 1-4]\n\nKept.")
    make_job(conversation=conversation, summary=summary, cost=None, model="extractive", error=FELL_BACK,
             trigger=SummaryJob.Trigger.MANUAL)
    make_record(conversation=conversation, tokens_full=300, tokens_sent=120, summary=summary,
                sent=[sent_entry("summary", summary), *(sent_entry("verbatim", m) for m in chat[4:])])
    _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)

    item = browser.find_element(By.CSS_SELECTOR, f'#summaries [data-summary="{summary.pk}"]')
    assert "internal error (500)" in item.text
    assert "an extractive summary was written instead" in item.text
    assert console_errors(browser) == []
