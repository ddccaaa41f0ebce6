"""The summary banner is a live region: a screen reader reads out what changes in it. A job's state
is said once, not again at each look the page takes at it while the job runs."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation, Message, SummaryJob
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import conversation_compact
from tests.support.browser import console_errors, in_accessibility_tree
from tests.support.chat import make_config, seed_messages
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Counts the page's reads of the job list, and each redraw of the banner's content.
WATCH = """
window.__polls = 0;
const real = window.fetch;
window.fetch = (...args) => {
  if (String(args[0]).includes('/summary-jobs/')) window.__polls += 1;
  return real(...args);
};
window.__drawn = 0;
new MutationObserver(() => { window.__drawn += 1; })
  .observe(document.getElementById('job-banner'), {childList: true, subtree: true, characterData: true});
"""


def test_a_running_summary_is_announced_once_not_at_every_poll(asgi_server, browser):
    """Redrawn at every poll (1 s, 1.6 s, 2.6 s… up to every 15 s), the banner had a screen reader say
    "Running. Summarizing earlier messages in the background…" again and again while the job ran."""
    _sign_up(browser, asgi_server.url, "banner-heard")
    user = get_user_model().objects.get(username="banner-heard")
    conversation = Conversation.objects.create(owner=user, title="Summarizing")
    Message.objects.create(conversation=conversation, role="user", content="A question.")
    Message.objects.create(conversation=conversation, role="assistant", content="An answer.")
    job = SummaryJob.objects.create(conversation=conversation, status=SummaryJob.Status.RUNNING)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    banner = browser.find_element(By.ID, "job-banner")
    _wait(browser, lambda d: "Summarizing earlier messages" in banner.text)
    browser.execute_script(WATCH)

    _wait(browser, lambda d: d.execute_script("return window.__polls") >= 2, timeout=15)
    assert browser.execute_script("return window.__drawn") == 0

    # A change is still said: the job ends.
    SummaryJob.objects.filter(pk=job.pk).update(status=SummaryJob.Status.FAILED, error="The model was down.")
    _wait(browser, lambda d: "Summary failed" in banner.text, timeout=30)
    assert browser.execute_script("return window.__drawn") > 0
    assert console_errors(browser) == []


def _compacted_with(model: str, *, browser, base: str, fake_url: str, username: str) -> SummaryJob:
    """A chat of 12 messages on a model of the fake endpoint, compacted by the real runner (the model
    called, then the extractive fallback); its page opened just after."""
    _sign_up(browser, base, username)
    user = get_user_model().objects.get(username=username)
    config = make_config(user, fake_url, model=model)
    conversation = Conversation.objects.create(owner=user, title="Compacted", llm_config=config)
    seed_messages(conversation, 12)
    job = conversation_compact(conversation=conversation, instructions="keep the numbers")
    while summary_job_run(job_id=job.pk).status == "retry":
        pass
    browser.get(f"{base}/c/{conversation.pk}/")
    job.refresh_from_db()
    return job


def _banner_saying(browser, words: str) -> str:
    """The job banner's text once it says `words`."""
    banner = browser.find_element(By.ID, "job-banner")
    _wait(browser, lambda d: words in banner.text)
    return banner.text


def test_a_summary_written_without_the_model_says_why_the_model_failed(
    asgi_server, browser, fake_openai, published, settings
):
    """The model failed on every attempt and the extractive summarizer wrote the summary: the banner
    said only "Summary ready in 0.1 s (extractive)", so a summary model that is down went unnoticed."""
    settings.SUMMARY_MAX_RETRIES = 1
    job = _compacted_with("fail-500", browser=browser, base=asgi_server.url, fake_url=fake_openai.base_url,
                          username="banner-fallback")
    assert (job.status, job.summary.extractive) == (SummaryJob.Status.DONE, True)
    said = _banner_saying(browser, "Summary ready")
    assert "internal error (500)" in said and "extractive summary was written instead" in said
    assert console_errors(browser) == []


def test_a_failed_summary_says_its_reason_once_in_sentences(asgi_server, browser, fake_openai, published):
    """The endpoint refused the key (no retry): the banner read "…Check the key in Settings. An extractive
    summary was written instead.. An extractive summary stands in meanwhile." (a second full stop
    after the reason, and the fallback said twice)."""
    job = _compacted_with("fail-401", browser=browser, base=asgi_server.url, fake_url=fake_openai.base_url,
                          username="banner-refused")
    assert (job.status, job.summary.extractive) == (SummaryJob.Status.FAILED, True)
    said = _banner_saying(browser, "Summary failed")
    assert "rejected the API key (401)" in said and ".." not in said
    assert said.lower().count("extractive summary") == 1
    assert console_errors(browser) == []


def test_a_summary_retrying_after_a_failed_attempt_says_why_it_waits(asgi_server, browser):
    """Between attempts a job is queued again, with why: the banner read only "Summary queued — the
    chat keeps working meanwhile." for as long as the retries took (up to a minute each)."""
    _sign_up(browser, asgi_server.url, "banner-retry")
    user = get_user_model().objects.get(username="banner-retry")
    conversation = Conversation.objects.create(owner=user, title="Retrying")
    seed_messages(conversation, 4)
    SummaryJob.objects.create(
        conversation=conversation, status=SummaryJob.Status.QUEUED, attempts=1,
        error="Attempt 1 failed: The model endpoint had an internal error (500). Retry in a moment. Retrying in 2.0 s.",
    )
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    banner = browser.find_element(By.ID, "job-banner")
    _wait(browser, lambda d: "Summary queued" in banner.text)
    assert "Attempt 1 failed: The model endpoint had an internal error (500)" in banner.text
    assert console_errors(browser) == []


def test_a_summary_no_worker_takes_says_a_worker_is_wanted(asgi_server, browser):
    """With no worker running (`serve --no-worker`, or uvicorn started alone), the banner read
    "Summary queued — the chat keeps working meanwhile." for as long as the page stayed open."""
    from datetime import timedelta

    from django.utils import timezone

    _sign_up(browser, asgi_server.url, "banner-no-worker")
    user = get_user_model().objects.get(username="banner-no-worker")
    conversation = Conversation.objects.create(owner=user, title="Waiting")
    seed_messages(conversation, 4)
    job = SummaryJob.objects.create(conversation=conversation, status=SummaryJob.Status.QUEUED)
    SummaryJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(minutes=3))
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    banner = browser.find_element(By.ID, "job-banner")
    _wait(browser, lambda d: "Summary queued" in banner.text)  # a worker may yet take it, in a moment
    _wait(browser, lambda d: "No worker has taken it yet" in banner.text)
    assert "manage.py serve" in banner.text
    assert console_errors(browser) == []


@pytest.mark.parametrize(("status", "said"), [
    (SummaryJob.Status.DONE, "version you left"),
    # The model refused, and the extractive summary written instead went with the version left.
    (SummaryJob.Status.FAILED, "went with the version you left"),
])
def test_a_summary_written_for_a_version_left_meanwhile_is_not_said_to_be_used(asgi_server, browser, status, said):
    """A message above the summary's span was edited while its job ran: the summary went with the
    version the edit left (summary_save), and is not sent on the one shown. The banner said "the model
    uses it from your next message" and the page put it at the chat's end, as the summary taking over."""
    from datetime import timedelta

    from django.utils import timezone

    from chatapp.chat.branch_services import branch_hide

    _sign_up(browser, asgi_server.url, f"banner-left-{status}")
    user = get_user_model().objects.get(username=f"banner-left-{status}")
    conversation = Conversation.objects.create(owner=user, title="Edited meanwhile", offline=True)
    ids = seed_messages(conversation, 8)
    branch_hide(conversation_id=conversation.pk, start_id=ids[2])  # the edit, taking the old version off the path
    summary = Message.objects.create(
        conversation=conversation, role="system", kind="summary", model="fake-echo",
        content="[Conversation summary — covers messages 1-4]\n\nThe old version.",
        covers_from_id=ids[0], covers_through_id=ids[3], covered_message_count=4,
        superseded=True, off_path_by=ids[2], extractive=status == SummaryJob.Status.FAILED,
    )
    now = timezone.now()
    error = "The model endpoint rejected the API key (401). An extractive summary was written instead."
    SummaryJob.objects.create(conversation=conversation, status=status, summary=summary,
                              error=error if status == SummaryJob.Status.FAILED else "",
                              started_at=now - timedelta(seconds=2), finished_at=now)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")

    shown = _banner_saying(browser, said)
    assert "uses it from your next message" not in shown and "stands in" not in shown
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-action="show-summary"]')
    # Once the page has dealt with the finished job (what it says then), no marker of that summary.
    _wait(browser, lambda d: "summary" in d.find_element(By.ID, "stream-status").get_attribute("textContent"))
    assert not browser.find_elements(By.ID, f"m-{summary.pk}")
    assert console_errors(browser) == []


def test_the_banner_s_first_words_are_heard(asgi_server, browser):
    """The banner was the live region itself, hidden until a job showed: a live region that appears with
    its words in it is not read out, so "History is 90% of the budget — compact now?" (or a summary
    queued in the background) came up unheard. The region is drawn, empty, from the start, the banner
    shown inside it."""
    _sign_up(browser, asgi_server.url, "banner-first-words")
    user = get_user_model().objects.get(username="banner-first-words")
    conversation = Conversation.objects.create(owner=user, title="Quiet so far")
    Message.objects.create(conversation=conversation, role="user", content="A question.")
    Message.objects.create(conversation=conversation, role="assistant", content="An answer.")
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    _wait(browser, lambda d: "/" in d.find_element(By.ID, "gauge-text").text)
    assert not browser.find_element(By.ID, "job-banner").is_displayed()

    browser.execute_script(
        "const region = document.getElementById('job-banner').closest('[aria-live]:not([aria-live=\"off\"])');"
        "region.dataset.bannerRegion = '1';")
    assert in_accessibility_tree(browser, "[data-banner-region]")  # there, silent, before any job

    SummaryJob.objects.create(conversation=conversation, status=SummaryJob.Status.RUNNING)
    browser.refresh()
    banner = browser.find_element(By.ID, "job-banner")
    _wait(browser, lambda d: "Summarizing earlier messages" in banner.text)
    assert browser.find_element(By.CSS_SELECTOR, "[aria-live]:has(> #job-banner)").get_attribute("role") == "status"
    assert console_errors(browser) == []
