"""Each message is an article named for who wrote it and when ("You, Dec 4, 14:02", "Assistant (model),
Dec 4, 14:02"), so a screen reader moving by articles or headings hears whose turn it is, whether the page
drew the message (a reload, a page read) or built it while the reply streamed; and a reply's own headings
sit below that level (a reply's `#` is an h3 under the message's h2, not a second h1 of the page)."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from chatapp.chat.models import Message
from tests.support.browser import console_errors
from tests.ui.test_a11y import _axe_source
from tests.ui.test_browser import _send, _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _when(message: Message) -> str:
    """The time as the page shows it (templates/chat/_message.html: "M j, H:i", the server's UTC)."""
    at = message.created_at
    return f"{at:%b} {at.day}, {at:%H:%M}"


def _names(driver) -> list[tuple[str, str]]:
    return [(a.get_attribute("data-role"), a.accessible_name)
            for a in driver.find_elements(By.CSS_SELECTOR, "#messages > article.msg")]


def _author_read_twice(driver) -> list[str]:
    """The meta row's author, model and time a screen reader would read after the name has said them."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#messages > article.msg .msg-meta')]"
        ".flatMap((m) => [...m.querySelectorAll('.msg-author, .msg-model, .msg-time')])"
        ".filter((n) => !n.closest('[aria-hidden=\"true\"]')).map((n) => n.textContent.trim())")


def _headings(driver) -> list[tuple[str, str]]:
    """The chat column's outline as a screen reader lists it (tag, accessible name)."""
    return [tuple(pair) for pair in driver.execute_script(
        "return [...document.querySelectorAll('#main :is(h1, h2, h3, h4, h5, h6)')]"
        ".filter((h) => !h.closest('[hidden], dialog:not([open])') && h.getClientRects().length)"
        ".map((h) => [h.tagName.toLowerCase(), h.textContent.trim()])")]


# axe's rules on what a screen reader makes of names and headings (best practice, beside test_a11y's WCAG run).
AXE_RULES = ["heading-order", "empty-heading", "aria-allowed-attr", "aria-prohibited-attr", "aria-valid-attr",
             "aria-valid-attr-value", "landmark-unique", "duplicate-id-aria"]


def _axe_violations(driver, source: str) -> list[dict]:
    driver.execute_script(source)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {runOnly: {type: 'rule', values: arguments[0]}})"
        ".then(r => done(r.violations.map(v => ({id: v.id, nodes: v.nodes.map(n => n.html.slice(0, 160))}))))"
        ".catch(e => done({error: String(e)}));", AXE_RULES)
    assert not isinstance(result, dict), result
    return result


def test_messages_are_named_by_author_and_time_streamed_and_reloaded(asgi_server, browser, fake_openai):
    source = _axe_source()
    user, _config = _sign_up_with_model(browser, asgi_server.url, "names", fake_url=fake_openai.base_url,
                                        model="verbatim-5", name="Verbatim")
    browser.get(f"{asgi_server.url}/")
    _send(browser, "# Plan\n\n## Step one\n\nGo.")
    question, reply = Message.objects.filter(conversation__owner=user).order_by("id")
    expected = [("user", f"You, {_when(question)}"), ("assistant", f"Assistant (verbatim-5), {_when(reply)}")]
    # built by the page as the reply streamed
    _wait(browser, lambda d: _names(d) == expected)
    streamed_outline = _headings(browser)
    assert _author_read_twice(browser) == []

    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#messages > article.msg"))
    assert _names(browser) == expected
    assert _author_read_twice(browser) == []
    # the reply's headings under its message's: h1 the chat, h2 each message, h3 and h4 the reply's
    reloaded_outline = _headings(browser)
    assert [tag for tag, _ in reloaded_outline] == ["h1", "h2", "h2", "h3", "h4"]
    assert reloaded_outline[1:] == [("h2", expected[0][1]), ("h2", expected[1][1]), ("h3", "Plan"), ("h4", "Step one")]
    assert streamed_outline[1:] == reloaded_outline[1:]
    # they look as they did: a reply's `#` keeps its size, whatever its level
    sizes = browser.execute_script(
        "const px = (s) => parseFloat(getComputedStyle(document.querySelector(s)).fontSize);"
        "const body = px('.msg--assistant .msg-content');"
        "return [px('.msg--assistant .md h3') / body, px('.msg--assistant .md h4') / body];")
    assert [round(s, 2) for s in sizes] == [1.4, 1.25]
    assert _axe_violations(browser, source) == []
    assert console_errors(browser) == []


def test_a_summary_is_named_as_one(asgi_server, browser, fake_openai):
    user, _config = _sign_up_with_model(browser, asgi_server.url, "names-summary", fake_url=fake_openai.base_url,
                                        model="fake-echo", name="Echo")
    browser.get(f"{asgi_server.url}/")
    _send(browser, "Hello")
    first, last = Message.objects.filter(conversation__owner=user).order_by("id")
    Message.objects.create(conversation=first.conversation, role=Message.Role.SYSTEM, kind=Message.Kind.SUMMARY,
                           content="We said hello.", covers_from_id=first.pk, covers_through_id=last.pk,
                           covered_message_count=2, model="fake-echo", token_count=5, char_count=14)
    browser.refresh()
    marker = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".summary-marker"))[0]
    assert marker.accessible_name.startswith("Summary takes over here")
    assert "covers 2 messages" in marker.accessible_name
