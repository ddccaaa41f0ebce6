"""The dashboard's summaries card: why a summary was written without the model, and the keyboard's
focus kept as older summaries are listed."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import SummaryJob
from tests.dashboard.factories import make_conversation, make_job, make_message, make_record, make_summary, sent_entry
from tests.dashboard.test_browser import _login, _wait_ready
from tests.support.browser import browser, console_errors
from tests.ui.test_browser import _wait

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


def _seven_summaries_shown(browser, live_server, user, *, title: str):
    """A chat of 18 messages and 7 summaries, its dashboard open with the five newest listed: the chat's
    messages, its summaries (oldest first) and the "Show older summaries" button, shown."""
    conversation = make_conversation(owner=user, title=title)
    chat = [make_message(conversation=conversation, role=("user", "assistant")[i % 2], content=f"message {i}")
            for i in range(18)]
    summaries = [make_summary(conversation=conversation, covers=(chat[0], chat[2 * k + 1]), covered=2 * k + 2,
                              content=f"[Conversation summary - covers messages 1-{2 * k + 2}]\n\nPart {k}.")
                 for k in range(7)]
    make_record(conversation=conversation, tokens_full=900, tokens_sent=300, summary=summaries[-1],
                sent=[sent_entry("summary", summaries[-1])])
    _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)
    more = browser.find_element(By.ID, "summaries-more")
    _wait(browser, lambda d: more.is_displayed())
    return chat, summaries, more


def test_showing_the_oldest_summaries_from_the_keyboard_keeps_the_focus(live_server, transactional_db, browser, user):
    """"Show older summaries" hides itself once the oldest are listed: the keyboard's focus, on it,
    fell to the page's start, far from the summaries just shown."""
    _, summaries, more = _seven_summaries_shown(browser, live_server, user, title="Many summaries")
    more.send_keys(Keys.ENTER)

    # the five newest were listed; the first of the two older ones, now listed, has the focus
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("data-summary") == str(summaries[1].pk))
    assert not more.is_displayed()
    assert console_errors(browser) == []


def test_a_summary_written_while_the_page_is_open_is_not_listed_twice(live_server, transactional_db, browser, user):
    """"Show older summaries" asked for the next offset: a summary written meanwhile (a turn in another
    tab) pushed the fifth one listed down to the sixth place, and it was listed again."""
    chat, summaries, more = _seven_summaries_shown(browser, live_server, user, title="Summaries meanwhile")
    make_summary(conversation=summaries[0].conversation, covers=(chat[0], chat[15]), covered=16,
                 content="[Newer]\n\nPart 7.")
    more.click()

    _wait(browser, lambda d: not more.is_displayed())
    listed = [e.get_attribute("data-summary")
              for e in browser.find_elements(By.CSS_SELECTOR, "#summaries [data-summary]")]
    assert listed == [str(s.pk) for s in reversed(summaries)]
    assert console_errors(browser) == []
