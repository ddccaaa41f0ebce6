"""The money card in headless Chromium: what the browser adds to it (the prompt-cache line) keeps the
priced turns' figures and names the turns it could not price."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.dashboard.factories import make_conversation, make_record
from tests.dashboard.test_browser import _login, _wait_ready
from tests.support.browser import browser, console_errors

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
