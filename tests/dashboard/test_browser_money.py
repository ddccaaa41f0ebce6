"""The money card in headless Chromium: what the browser adds to it (the prompt-cache line) keeps the
priced turns' figures and names the turns it could not price."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.dashboard.factories import make_conversation, make_record
from tests.dashboard.test_browser import _login, _wait_ready
from tests.support.browser import browser, console_errors
from tests.ui.test_browser import _wait

__all__ = ["browser"]

pytestmark = [pytest.mark.browser]


def test_the_cache_line_stays_with_one_unpriced_turn(live_server, transactional_db, browser, user):
    """One turn on a model with no price (the chat switched to a local model) took the line away."""
    conversation = make_conversation(owner=user, title="Mixed")
    make_record(conversation=conversation, tokens_full=2000, tokens_sent=2000)
    make_record(conversation=conversation, tokens_full=2500, tokens_sent=2500)
    make_record(conversation=conversation, tokens_full=3000, tokens_sent=3000, model="my-local-llama")
    _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)
    line = browser.find_element(By.CSS_SELECTOR, "[data-card=money] [data-cache-estimate]")
    assert line.get_attribute("data-cache-estimate") == "2000"
    assert line.text.startswith("Sent $0.0007, ≈ $0.0005 with prompt caching (27% cached, est.)"), line.text
    assert line.text.endswith(" · 1 turn unpriced"), line.text
    assert console_errors(browser) == []


def test_a_small_turns_cost_is_shown_not_rounded_to_zero(live_server, transactional_db, browser, user):
    """A short turn on a cheap model costs a few millionths of a dollar: the turn read "Cost $0.0000
    (full $0.0000)", as if free, beside the cards that priced it."""
    conversation = make_conversation(owner=user, title="Cheap")
    make_record(conversation=conversation, tokens_full=300, tokens_sent=150, strategy="truncate", triggered=True,
                cost_full="0.000045", cost_sent="0.000023")
    _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)
    meta_text = "return document.querySelector('.dash-turnmeta')?.textContent || ''"
    _wait(browser, lambda d: "Cost" in d.execute_script(meta_text))
    meta = browser.execute_script(meta_text)
    assert "Cost $0.000023 (full $0.000045)" in meta, meta
    assert console_errors(browser) == []


def test_a_refused_turn_does_not_make_the_reported_cache_line_partly_estimated(
        live_server, transactional_db, browser, user):
    """Every billed turn's endpoint reported its cached tokens; one request was refused (billed nothing,
    so nothing of it was estimated either): the line read "partly estimated"."""
    conversation = make_conversation(owner=user, title="Reported")
    make_record(conversation=conversation, tokens_full=2000, tokens_sent=2000, provider=2000,
                provider_cached_tokens=0, cost_full="0.000300", cost_sent="0.000300")
    make_record(conversation=conversation, tokens_full=2500, tokens_sent=2500, provider=2500,
                provider_cached_tokens=1920, cost_full="0.000231", cost_sent="0.000231")
    make_record(conversation=conversation, tokens_full=3000, tokens_sent=3000, cost_full="0", cost_sent="0")  # refused
    client = _login(browser, live_server, user)
    estimate = client.get(f"/api/dashboard/conversations/{conversation.pk}/series/").json()["prompt_cache_estimate"]
    assert (estimate["provider_reported_turns"], estimate["refused_turns"]) == (2, 1)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)
    line = browser.find_element(By.CSS_SELECTOR, "[data-card=money] [data-cache-estimate]")
    assert "reported by the endpoint)" in line.text, line.text
    assert console_errors(browser) == []
