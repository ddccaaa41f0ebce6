"""Compaction controls in a real browser (issue 4): `/compact` with instructions and the job's state,
the "History is NN% of the budget — compact now?" question, and switching the model of a chat."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

import optimizer
from chatapp.chat import summary_requests
from chatapp.chat.gauge import context_gauge
from chatapp.chat.models import Conversation, Message, SummaryJob
from chatapp.chat.services import user_settings_update
from chatapp.chat.summary_requests import summary_requests_wait
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import summary_job_request
from chatapp.providers.models import LLMConfig
from tests.support.browser import console_errors
from tests.ui.test_browser import _send, _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Records the page's API calls, to see what the composer actually sent.
SPY_FETCH = """
window.__calls = [];
const original = window.fetch;
window.fetch = function (url, options) {
  const opts = options || {};
  window.__calls.push({url: String(url), method: opts.method || 'GET', body: opts.body || null});
  return original.apply(this, arguments);
};
window.__sameDocument = true;
"""


def _config(owner, base_url, *, name, window, default=False):
    return LLMConfig.objects.create(
        owner=owner, name=name, base_url=base_url, model="fake-echo", context_window=window,
        max_output_tokens=500, temperature=0.0, is_default=default,
    )


def _seed(conversation: Conversation, count: int, *, words: int = 40) -> None:
    """Alternating user / assistant messages with stored counts and running totals, as the request path keeps them."""
    rows = []
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        content = f"message {i} " + " ".join(f"word{(i * 7 + j) % 97}" for j in range(words))
        tokens = optimizer.count_message({"role": role, "content": content}, model="fake-echo")
        rows.append(Message(conversation=conversation, role=role, content=content, token_count=tokens,
                            char_count=len(content)))
    Message.objects.bulk_create(rows)
    Conversation.objects.filter(pk=conversation.pk).update(
        live_message_count=count,
        live_char_count=sum(r.char_count for r in rows),
        live_token_count=sum(r.token_count for r in rows),
    )


def _seeded_chat(browser, base, username, *, title, fake_url):
    """A user signed up in the browser, with a 16k-window echo model as default and a chat of 12 messages."""
    _sign_up(browser, base, username)
    user = get_user_model().objects.get(username=username)
    _config(user, fake_url, name="Echo 16k", window=16_000, default=True)
    conversation = Conversation.objects.create(owner=user, title=title)
    _seed(conversation, 12)
    return user, conversation


def _asking_chat(browser, base, username, *, fake_url, title):
    """A user signed up in the browser who wants to be asked before a compaction, with a 4k-window
    echo model and a chat of 60 messages that needs a summary on its next turn."""
    _sign_up(browser, base, username)
    user = get_user_model().objects.get(username=username)
    config = _config(user, fake_url, name="Echo 4k", window=4_000, default=True)
    user_settings_update(user=user, preference="quality", confirm_compaction=True)
    conversation = Conversation.objects.create(owner=user, title=title, llm_config=config)
    _seed(conversation, 60)
    return user, conversation


def _banner(driver):
    return driver.find_element(By.ID, "job-banner")


def _banner_status(driver) -> str | None:
    banner = _banner(driver)
    return banner.get_attribute("data-status") if banner.is_displayed() else None


def test_compact_command_shows_the_job_state_then_the_summary_without_a_reload(
    asgi_server, browser, fake_openai, screenshot_dir
):
    base = asgi_server.url
    _sign_up(browser, base, "browser-compact")
    user = get_user_model().objects.get(username="browser-compact")
    big = _config(user, fake_openai.base_url, name="Echo 16k", window=16_000, default=True)
    small = _config(user, fake_openai.base_url, name="Echo 4k", window=4_000)
    browser.refresh()
    _send(browser, "Here is the query: SELECT id FROM invoices WHERE paid;")
    _send(browser, "And the index: CREATE INDEX invoices_paid ON invoices (paid);")
    conversation = Conversation.objects.get(owner=user)
    _wait(browser, lambda d: d.find_element(By.ID, "gauge-text").text.endswith("/ 15.5k"))

    # Two rounds are all kept as they are: the command is refused with the reason, and the text is
    # given back to the box, with no job started.
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("/compact keep the SQL")
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: "Nothing to summarize yet" in d.find_element(By.ID, "toasts").text)
    assert box.get_attribute("value") == "/compact keep the SQL"
    assert not SummaryJob.objects.filter(conversation=conversation).exists()
    # the browser logs the refusal's 400 as a failed load; nothing else went wrong
    assert [e["message"] for e in console_errors(browser) if "/compact/ " not in e["message"]] == []
    box.clear()
    _send(browser, "Which column is indexed?")

    # `/compact <instructions>` in the composer starts a summary instead of sending a message.
    browser.execute_script(SPY_FETCH)
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("/compact keep the SQL")
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: _banner_status(d) in {"pending", "queued", "running"})
    banner = _banner(browser)
    assert "keep the SQL" in banner.text
    browser.save_screenshot(str(screenshot_dir / "chat-compact-queued.png"))
    assert re.search(r"PENDING|QUEUED|RUNNING", banner.find_element(By.CSS_SELECTOR, ".job-state").text)
    calls = browser.execute_script("return window.__calls")
    compact = [c for c in calls if c["url"].endswith(f"/api/conversations/{conversation.pk}/compact/")]
    assert [c["method"] for c in compact] == ["POST"]
    assert json.loads(compact[0]["body"]) == {"instructions": "keep the SQL"}
    job = SummaryJob.objects.get(conversation=conversation)
    assert (job.trigger, job.instructions) == (SummaryJob.Trigger.MANUAL, "keep the SQL")
    # The command is not a chat message: nothing went to the model, the box is empty again.
    assert Message.objects.filter(conversation=conversation, role="user").count() == 3
    assert browser.find_element(By.ID, "composer-input").get_attribute("value") == ""
    # While the job is active the page keeps asking for its state.
    _wait(browser, lambda d: len([c for c in d.execute_script("return window.__calls")
                                  if "/summary-jobs/" in c["url"]]) >= 2)

    # A worker finishes it (done here by hand, so the test needs no worker): the page notices on its
    # next poll, says how long it took and shows the summary marker, without reloading.
    chat = list(Message.objects.filter(conversation=conversation, kind="chat").order_by("id"))
    summary = Message.objects.create(
        conversation=conversation, role="system", kind="summary", model="fake-echo",
        content="[Conversation summary — covers messages 1-2]\n\n**SQL kept:**\n\n```sql\n"
                "SELECT id FROM invoices WHERE paid;\n```",
        covers_from_id=chat[0].pk, covers_through_id=chat[1].pk, covered_message_count=2,
    )
    now = timezone.now()
    SummaryJob.objects.filter(pk=job.pk).update(
        status=SummaryJob.Status.DONE, summary=summary, started_at=now - timedelta(milliseconds=2400),
        finished_at=now,
    )
    _wait(browser, lambda d: _banner_status(d) == "done")
    assert "2.4 s" in _banner(browser).text
    marker = _wait(browser, lambda d: d.find_elements(By.ID, f"m-{summary.pk}"))[0]
    assert "Summary takes over here" in marker.text
    # built by the page, it is named as the server names one (a screen reader hears what the group is)
    assert marker.accessible_name == "Summary takes over here covers 2 messages · fake-echo"
    assert browser.execute_script("return window.__sameDocument") is True
    _banner(browser).find_element(By.CSS_SELECTOR, '[data-action="show-summary"]').click()
    _wait(browser, lambda d: d.find_element(By.ID, f"m-{summary.pk}").get_attribute("open") is not None)
    assert "SELECT id FROM invoices" in marker.find_element(By.CSS_SELECTOR, ".summary-content").text
    browser.save_screenshot(str(screenshot_dir / "chat-compact-done.png"))

    # Discarding it updates the marker in place too.
    marker.find_element(By.CSS_SELECTOR, '[data-action="discard-summary"]').click()
    _wait(browser, lambda d: d.find_element(By.ID, "confirm-ok").is_displayed())
    browser.find_element(By.ID, "confirm-ok").click()
    _wait(browser, lambda d: "is-discarded" in d.find_element(By.ID, f"m-{summary.pk}").get_attribute("class"))
    assert "Discarded summary" in browser.find_element(By.ID, f"m-{summary.pk}").text
    assert Message.objects.get(pk=summary.pk).discarded
    # "Summary ready" needs no answer: it leaves by itself once the pointer is elsewhere (issue 14, 11)
    ActionChains(browser).move_to_element(browser.find_element(By.ID, "composer-input")).perform()
    _wait(browser, lambda d: not _banner(d).is_displayed(), timeout=20)
    assert browser.execute_script("return window.__sameDocument") is True

    # Switch this chat's model from the header: the gauge's budget follows the new window.
    Select(browser.find_element(By.ID, "model-select")).select_by_visible_text("Echo 4k")
    _wait(browser, lambda d: d.find_element(By.ID, "gauge-text").text.endswith("/ 3.5k"))
    conversation.refresh_from_db()
    assert conversation.llm_config_id == small.pk != big.pk
    reply = _send(browser, "Which model answers now?")
    assert reply.get_attribute("data-status") == "complete"
    assert browser.execute_script("return window.__sameDocument") is True
    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.ID, "model-select"))
    assert Select(browser.find_element(By.ID, "model-select")).first_selected_option.text == "Echo 4k"
    assert console_errors(browser) == []


def test_confirm_before_compaction_asks_and_not_now_dismisses(asgi_server, browser, fake_openai, screenshot_dir):
    base = asgi_server.url
    user, conversation = _asking_chat(browser, base, "browser-confirm", fake_url=fake_openai.base_url,
                                      title="Invoices and SQL")
    job = summary_job_request(conversation=conversation, trigger=SummaryJob.Trigger.AUTO)
    assert job.status == SummaryJob.Status.AWAITING_CONFIRMATION

    # On page load: the question, with the gauge's percentage, and both answers.
    browser.get(f"{base}/c/{conversation.pk}/")
    _wait(browser, lambda d: _banner_status(d) == "awaiting")
    banner = _banner(browser)
    question = re.search(r"History is (\d+)% of the budget — compact now\?", banner.text)
    assert question, banner.text
    # The question speaks of the whole history against the budget (what the trigger measures), not
    # of the already-optimized next request the gauge shows.
    conversation.refresh_from_db()  # the seeded messages' running totals
    history_ratio = context_gauge(conversation=conversation, user=user)["history_ratio"]
    assert int(question.group(1)) == round(history_ratio * 100)
    # and the gauge's figure, when it differs, is named as the next request's
    gauge = context_gauge(conversation=conversation, user=user)
    next_pct = round(gauge["tokens"] / gauge["budget"] * 100)
    note = f"The next request, already trimmed, uses {next_pct}% (the gauge)."
    assert (note in banner.text) == (next_pct != int(question.group(1))), banner.text
    now_btn = banner.find_element(By.CSS_SELECTOR, '[data-action="compact"]')
    not_now = banner.find_element(By.CSS_SELECTOR, '[data-action="not-now"]')
    assert (now_btn.text, not_now.text) == ("Compact now", "Not now")
    browser.execute_script("document.getElementById('timeline').scrollTop = 1e9")
    browser.save_screenshot(str(screenshot_dir / "chat-compact.png"))
    browser.set_window_size(390, 844)
    _wait(browser, lambda d: not d.find_element(By.ID, "sidebar").is_displayed())
    browser.save_screenshot(str(screenshot_dir / "chat-compact-phone.png"))
    browser.set_window_size(1366, 900)
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    browser.save_screenshot(str(screenshot_dir / "chat-compact-dark.png"))
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert SummaryJob.objects.get(pk=job.pk).status == SummaryJob.Status.AWAITING_CONFIRMATION

    # "Not now": the question goes away and the job is cancelled, nothing was enqueued.
    not_now.click()
    _wait(browser, lambda d: not _banner(d).is_displayed())
    # the focus goes to the message box with the banner, not to the page
    assert browser.switch_to.active_element.get_attribute("id") == "composer-input"
    job.refresh_from_db()
    assert job.status == SummaryJob.Status.CANCELLED
    browser.refresh()
    _wait(browser, lambda d: "/" in d.find_element(By.ID, "gauge-text").text)
    assert not _banner(browser).is_displayed()

    # "Not now" holds through a short turn that still needs a summary...
    reply = _send(browser, "What did we decide about the invoices?")
    assert reply.get_attribute("data-status") == "complete"
    summary_requests_wait(timeout=10)
    assert SummaryJob.objects.filter(conversation=conversation).order_by("-id").first().pk == job.pk
    assert not _banner(browser).is_displayed()
    # ...until the history has grown by another tenth of the budget: then the question comes back
    # (after the reply's `done`), and "Compact now" starts it.
    reply = _send(browser, "Here is the full list of invoice numbers: " + " ".join(f"INV-{n}" for n in range(150)))
    assert reply.get_attribute("data-status") == "complete"
    _wait(browser, lambda d: _banner_status(d) == "awaiting")
    asked = SummaryJob.objects.filter(conversation=conversation).order_by("-id").first()
    assert asked.pk != job.pk and asked.status == SummaryJob.Status.AWAITING_CONFIRMATION
    assert re.search(r"History is \d+% of the budget — compact now\?", _banner(browser).text)
    _banner(browser).find_element(By.CSS_SELECTOR, '[data-action="compact"]').click()
    _wait(browser, lambda d: _banner_status(d) in {"pending", "queued", "running", "done"})
    # The button pressed is gone with the question: focus is not left on the page.
    assert browser.switch_to.active_element.tag_name != "body"
    asked.refresh_from_db()
    assert asked.trigger == SummaryJob.Trigger.MANUAL
    assert asked.status != SummaryJob.Status.AWAITING_CONFIRMATION
    assert console_errors(browser) == []


def test_only_the_summary_in_use_shows_as_active(asgi_server, browser, fake_openai):
    """Issue 14, finding 4: a summary replaced by a later one is shown as replaced, without tools;
    discarding the later one puts the earlier one in use again, on the page as on the server."""
    base = asgi_server.url
    _, conversation = _seeded_chat(browser, base, "browser-summaries", title="Two summaries",
                                   fake_url=fake_openai.base_url)
    chat = list(Message.objects.filter(conversation=conversation).order_by("id"))
    older, newer = (
        Message.objects.create(
            conversation=conversation, role="system", kind="summary", content=f"[Conversation summary]\n\n{text}",
            covers_from_id=chat[0].pk, covers_through_id=chat[last].pk, covered_message_count=last + 1,
        )
        for text, last in (("The first part.", 3), ("The first part and more.", 7))
    )
    browser.get(f"{base}/c/{conversation.pk}/")

    def state(d, summary):
        marker = d.find_element(By.ID, f"m-{summary.pk}")
        tools = marker.find_elements(By.CSS_SELECTOR, ".summary-tools")
        return (marker.find_element(By.CSS_SELECTOR, ".summary-marker-title").get_attribute("textContent"),
                bool(tools) and tools[0].get_attribute("hidden") is None)

    _wait(browser, lambda d: state(d, older) == ("Replaced by a later summary", False))
    assert state(browser, newer) == ("Summary takes over here", True)

    # opened and clicked from script: the page keeps the timeline scrolled to its end
    marker = browser.find_element(By.ID, f"m-{newer.pk}")
    browser.execute_script("arguments[0].open = true", marker)
    browser.execute_script("arguments[0].click()",
                           marker.find_element(By.CSS_SELECTOR, '[data-action="discard-summary"]'))
    _wait(browser, lambda d: d.find_element(By.ID, "confirm-ok").is_displayed())
    browser.find_element(By.ID, "confirm-ok").click()
    _wait(browser, lambda d: state(d, older) == ("Summary takes over here", True))
    assert "is-discarded" in browser.find_element(By.ID, f"m-{newer.pk}").get_attribute("class")
    assert not Message.objects.get(pk=older.pk).discarded and Message.objects.get(pk=newer.pk).discarded
    assert console_errors(browser) == []


def test_the_divider_says_which_left_out_messages_a_summary_stands_in_for(asgi_server, browser, fake_openai):
    """Issue 14, findings 2 and 10: messages left out after what the summary covers are said to be
    left out, not summarized."""
    base = asgi_server.url
    _sign_up(browser, base, "divider-reader")
    user = get_user_model().objects.get(username="divider-reader")
    config = _config(user, fake_openai.base_url, name="Echo 4k", window=4_000, default=True)
    conversation = Conversation.objects.create(owner=user, title="Gap", llm_config=config)
    _seed(conversation, 300, words=12)
    chat = list(Message.objects.filter(conversation=conversation).order_by("id").values_list("id", flat=True))
    Message.objects.create(
        conversation=conversation, role="system", kind="summary", content="[Conversation summary]\n\nEarly part.",
        covers_from_id=chat[1], covers_through_id=chat[99], covered_message_count=99,
    )
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=chat[200])
    browser.get(f"{base}/c/{conversation.pk}/")

    # the divider is rebuilt on every gauge update: read it afresh each time
    text = _wait(browser, lambda d: next((m.text for m in d.find_elements(By.CSS_SELECTOR, ".window-marker")
                                          if "later ones are left out" in m.text), None))
    assert "a summary stands in for the older ones" in text
    assert console_errors(browser) == []


def test_a_summary_written_between_two_polls_appears_without_a_reload(asgi_server, browser, fake_openai):
    """An automatic job may start and end before the page first polls it: its summary is shown all
    the same when the page next hears of it (here, after its next reply), not only after a reload."""
    base = asgi_server.url
    _, conversation = _seeded_chat(browser, base, "between-polls", title="Between polls",
                                   fake_url=fake_openai.base_url)
    browser.get(f"{base}/c/{conversation.pk}/")
    _wait(browser, lambda d: "/" in d.find_element(By.ID, "gauge-text").text)

    # A job the page never saw running: queued and done on the server between two polls.
    chat = list(Message.objects.filter(conversation=conversation).order_by("id"))
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=chat[8].pk)
    job = summary_job_request(conversation=conversation, trigger=SummaryJob.Trigger.AUTO)
    assert summary_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()

    _send(browser, "And now?")
    marker = _wait(browser, lambda d: d.find_elements(By.ID, f"m-{job.summary_id}"))[0]
    assert marker.find_element(By.CSS_SELECTOR, ".summary-marker-title").get_attribute("textContent") == (
        "Summary takes over here")
    assert console_errors(browser) == []


def test_a_question_asked_after_the_reply_ended_still_shows(asgi_server, browser, fake_openai, monkeypatch):
    """A turn's summary request runs in the background after the reply: when its job lands after the
    page has read the job list (a slow database, a busy process), the page reads again and asks."""
    base = asgi_server.url
    _, conversation = _asking_chat(browser, base, "browser-late", fake_url=fake_openai.base_url,
                                   title="Late question")

    def late_request(**kwargs):
        time.sleep(1.5)  # the page has read the list (after `done` and the gauge) by then
        return summary_job_request(**kwargs)

    monkeypatch.setattr(summary_requests, "summary_job_request", late_request)
    browser.get(f"{base}/c/{conversation.pk}/")
    _wait(browser, lambda d: "/" in d.find_element(By.ID, "gauge-text").text)
    assert not _banner(browser).is_displayed()
    reply = _send(browser, "What did we decide about the invoices?")
    assert reply.get_attribute("data-status") == "complete"
    _wait(browser, lambda d: _banner_status(d) == "awaiting")
    asked = SummaryJob.objects.get(conversation=conversation)
    assert asked.status == SummaryJob.Status.AWAITING_CONFIRMATION
    assert _banner(browser).get_attribute("data-job-id") == str(asked.pk)
    assert console_errors(browser) == []


def test_the_question_wraps_in_a_tablets_narrow_column(asgi_server, browser, fake_openai):
    # Beside a tablet's sidebar the chat column is as narrow as a phone: the question's buttons go under
    # its words there too, rather than squeezing them.
    _, conversation = _asking_chat(browser, asgi_server.url, "tablet-ask", fake_url=fake_openai.base_url,
                                   title="Invoices")
    summary_job_request(conversation=conversation, trigger=SummaryJob.Trigger.AUTO)
    browser.set_window_size(800, 1000)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    _wait(browser, lambda d: _banner_status(d) == "awaiting")
    banner = _banner(browser)
    words = banner.find_element(By.CSS_SELECTOR, ".job-text").rect
    actions = banner.find_element(By.CSS_SELECTOR, ".job-actions").rect
    assert actions["y"] >= words["y"] + words["height"] - 1 and words["width"] > 300
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 800


def test_compact_typed_with_a_capital_compacts_as_the_menu_and_the_server_read_it(
    asgi_server, browser, fake_openai, published
):
    """"/Compact" (a phone's keyboard capitalizes the first letter) was listed by the "/" menu as
    /compact, and the server reads it so, but the composer sent it to the model as a message."""
    base = asgi_server.url
    _, conversation = _seeded_chat(browser, base, "capital-compact", title="Capital", fake_url=fake_openai.base_url)
    browser.get(f"{base}/c/{conversation.pk}/")
    _wait(browser, lambda d: "/" in d.find_element(By.ID, "gauge-text").text)
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("/Compact")
    _wait(browser, lambda d: d.find_element(By.ID, "slash-menu").is_displayed())
    box.send_keys(" keep the SQL")
    box.send_keys(Keys.ENTER)

    _wait(browser, lambda d: _banner_status(d) in {"pending", "queued", "running"})
    job = SummaryJob.objects.get(conversation=conversation)
    assert (job.trigger, job.instructions) == (SummaryJob.Trigger.MANUAL, "keep the SQL")
    assert not Message.objects.filter(conversation=conversation, content__icontains="compact").exists()
    assert box.get_attribute("value") == ""
    assert console_errors(browser) == []


def test_compact_in_a_chat_deleted_in_another_tab_says_the_chat_is_gone(asgi_server, browser, fake_openai):
    """The chat deleted elsewhere answers the compaction 404, which the page read as the server lacking
    the feature: "Compaction is not available on this server yet."."""
    base = asgi_server.url
    _, conversation = _seeded_chat(browser, base, "compact-gone", title="Gone", fake_url=fake_openai.base_url)
    browser.get(f"{base}/c/{conversation.pk}/")
    _wait(browser, lambda d: "/" in d.find_element(By.ID, "gauge-text").text)
    conversation.delete()  # another tab or device

    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("/compact keep the SQL")
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: "no longer exists" in d.find_element(By.ID, "toasts").text)
    assert "not available" not in browser.find_element(By.ID, "toasts").text
    assert box.get_attribute("value") == "/compact keep the SQL"  # given back, as any refusal
