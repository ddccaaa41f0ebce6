"""Branch in new chat past the request's limit in headless Chromium: the note under the message says the
new chat is copied in the background and follows the import job, then opens the new chat, or links it
when the page holds unsent text, or says why the job failed. The job is run by the test (as a worker
would run it), after the page has shown the note."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat import fork_services
from chatapp.chat.import_services import import_job_fail, import_job_run
from chatapp.chat.models import Conversation
from chatapp.chat.tasks import import_conversations
from tests.support.browser import console_errors
from tests.ui.test_browser import _send, _sign_up, _wait
from tests.ui.test_browser_branches import _click, _message, _texts

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def published(monkeypatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr(import_conversations, "apply_async", lambda *, args, **kwargs: sent.append(args[0]))
    return sent


def _fork(browser, message_id: str, published: list[int]) -> tuple[int, str]:
    """Branch from the message; its job's id once published, and the note's text once it says it copies."""
    before = len(published)
    _click(browser, _message(browser, message_id).find_element(By.CSS_SELECTOR, '[data-action="message-menu"]'))
    _click(browser, _message(browser, message_id).find_element(By.CSS_SELECTOR, '[data-action="fork-chat"]'))
    _wait(browser, lambda d: len(published) > before)
    note = _wait(
        browser,
        lambda d: [
            n
            for n in _message(d, message_id).find_elements(By.CSS_SELECTOR, ".msg-fork")
            if "Copying 3 messages into a new chat…" in n.text
        ],
    )[0]
    return published[-1], note.text


def test_a_long_branch_is_followed_in_the_chat_then_opened_or_linked(asgi_server, browser, monkeypatch, published):
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 2)
    _sign_up(browser, asgi_server.url, "browser-fork-job")
    _send(browser, "Tell me about apples.")
    _send(browser, "And about pears?")
    original = Conversation.objects.get(owner__username="browser-fork-job")
    second = browser.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")[1].get_attribute("data-id")

    # The worker fails it: the note says why, in the colours of an error.
    job_id, _ = _fork(browser, second, published)
    import_job_fail(job_id=job_id, reason="The worker ran out of memory.")
    _wait(
        browser,
        lambda d: (
            "The worker ran out of memory." in _message(d, second).find_element(By.CSS_SELECTOR, ".msg-fork").text
        ),
    )
    note = _message(browser, second).find_element(By.CSS_SELECTOR, ".msg-fork")
    assert "is-failed" in note.get_attribute("class") and note.get_attribute("role") == "alert"

    # Text typed meanwhile is not dropped by leaving the page: the new chat is linked instead.
    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys("words not sent yet")
    job_id, _ = _fork(browser, second, published)
    assert import_job_run(job_id=job_id).status == "done"
    link = _wait(browser, lambda d: _message(d, second).find_elements(By.CSS_SELECTOR, ".msg-fork a"))[0]
    first_fork = Conversation.objects.exclude(pk=original.pk).get(owner__username="browser-fork-job")
    assert link.text == first_fork.title and link.get_attribute("href").endswith(f"/c/{first_fork.pk}/")
    assert browser.current_url.endswith(f"/c/{original.pk}/")

    # With nothing to lose, the new chat opens as a short branch's does.
    composer.send_keys(Keys.CONTROL, "a")
    composer.send_keys(Keys.DELETE)
    job_id, _ = _fork(browser, second, published)
    assert import_job_run(job_id=job_id).status == "done"
    _wait(browser, lambda d: f"/c/{original.pk}/" not in d.current_url)
    second_fork = Conversation.objects.exclude(pk__in=[original.pk, first_fork.pk]).get(
        owner__username="browser-fork-job"
    )
    assert browser.current_url.endswith(f"/c/{second_fork.pk}/")
    _wait(browser, lambda d: len(_texts(d)) == 3)
    assert _texts(browser)[0] == "Tell me about apples." and _texts(browser)[2] == "And about pears?"
    assert console_errors(browser) == []


def test_branching_again_while_the_long_branch_is_copied_makes_no_second_chat(
    asgi_server, browser, monkeypatch, published
):
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 2)
    _sign_up(browser, asgi_server.url, "browser-fork-twice")
    _send(browser, "Tell me about apples.")
    _send(browser, "And about pears?")
    second = browser.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")[1].get_attribute("data-id")
    original = Conversation.objects.get(owner__username="browser-fork-twice")
    job_id, _ = _fork(browser, second, published)

    # Chosen again (the note looks idle while no worker runs): said, not queued a second time.
    menu = _message(browser, second).find_element(By.CSS_SELECTOR, '[data-action="message-menu"]')
    _click(browser, menu)
    _click(browser, _message(browser, second).find_element(By.CSS_SELECTOR, '[data-action="fork-chat"]'))
    _wait(browser, lambda d: any("still being copied" in t.text for t in d.find_elements(By.CSS_SELECTOR, ".toast")))
    assert published == [job_id]

    assert import_job_run(job_id=job_id).status == "done"
    # the original chat's page matched the wait below at once: wait for the new chat's page
    fork = Conversation.objects.filter(owner__username="browser-fork-twice").exclude(pk=original.pk).get()
    _wait(browser, lambda d: d.current_url.endswith(f"/c/{fork.pk}/"))
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]"))
    assert Conversation.objects.filter(owner__username="browser-fork-twice").count() == 2
    assert console_errors(browser) == []
