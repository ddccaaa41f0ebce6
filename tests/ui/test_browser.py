"""The product in a real browser: headless Chromium against the ASGI app under uvicorn."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import Select, WebDriverWait

from chatapp.chat.models import Conversation, Message, UserSettings
from chatapp.providers.models import LLMConfig
from tests.support.browser import console_errors

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = '<script>window.__xss=1</script> and <img src=x onerror="window.__xss=1"> and [x](javascript:window.__xss=1)'

# Records every distinct text the newest reply shows while it streams, to see it arrive in pieces.
WATCH_STREAM = """
window.__seen = [];
const target = document.getElementById('messages');
new MutationObserver(() => {
  const replies = target.querySelectorAll('.msg--assistant.is-streaming .msg-content');
  const last = replies[replies.length - 1];
  if (last && last.textContent && window.__seen[window.__seen.length - 1] !== last.textContent) {
    window.__seen.push(last.textContent);
  }
}).observe(target, {subtree: true, childList: true, characterData: true});
"""


def _wait(driver, condition, timeout=30):
    # The timeline re-renders replies in place; a lookup racing such an update is simply retried.
    # ChromeDriver reports some such races as a plain error naming a node gone from the document.
    def settled(d):
        try:
            return condition(d)
        except WebDriverException as error:
            if "does not belong to the document" not in str(error):
                raise
            return False

    return WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException,)).until(settled)


def _menu_dialog(driver, action: str, dialog_id: str):
    """Open the chat header's "⋯" menu, choose its item `action`, and wait for the dialog it opens."""
    driver.find_element(By.ID, "conv-menu-btn").click()
    item = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, f'[data-action="{action}"]'))
    _wait(driver, lambda d: item.is_displayed())
    item.click()
    dialog = driver.find_element(By.ID, dialog_id)
    _wait(driver, lambda d: dialog.get_attribute("open") is not None)
    return dialog


def _idle(driver) -> bool:
    """No reply streaming: the box is open either way, but Enter sends only then."""
    return "is-streaming" not in (driver.find_element(By.ID, "app").get_attribute("class") or "").split()


def _send(driver, text):
    _wait(driver, _idle)
    box = driver.find_element(By.ID, "composer-input")
    lines = text.split("\n")
    for i, line in enumerate(lines):
        box.send_keys(line)
        if i < len(lines) - 1:
            box.send_keys(Keys.SHIFT, Keys.ENTER)
    before = len(driver.find_elements(By.CSS_SELECTOR, ".msg--assistant"))
    box.send_keys(Keys.ENTER)
    _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg--assistant")) > before)
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status")
          in {"complete", "stopped", "error"})
    return driver.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1]


def _sign_up(driver, base, username):
    driver.get(f"{base}/accounts/signup/")
    driver.find_element(By.NAME, "username").send_keys(username)
    driver.find_element(By.NAME, "password1").send_keys("Browser-test-pass-42")
    driver.find_element(By.NAME, "password2").send_keys("Browser-test-pass-42")
    driver.find_element(By.CSS_SELECTOR, ".auth-form button[type=submit]").click()
    _wait(driver, lambda d: d.find_elements(By.ID, "composer-input"))


def _add_model_form(driver, base):
    """Settings opened at `base`: the add-a-model form's base URL and model inputs, and the note under
    its context window that says where the window comes from."""
    driver.get(f"{base}/settings/")
    return (
        driver.find_element(By.ID, "id_new-base_url"),
        driver.find_element(By.ID, "id_new-model"),
        driver.find_element(By.CSS_SELECTOR, "#add-config .window-source"),
    )


def _sign_up_with_model(driver, base, username, *, fake_url, model, name, **fields):
    """Sign up in the browser, then give the new user a default model on the fake endpoint (a 16k
    window, 500-token replies; `fields` for more); returns the user and the config."""
    _sign_up(driver, base, username)
    user = get_user_model().objects.get(username=username)
    config = LLMConfig.objects.create(owner=user, name=name, base_url=fake_url, model=model, context_window=16_000,
                                      max_output_tokens=500, is_default=True, **fields)
    return user, config


def test_sign_up_chat_stream_settings_and_no_xss(asgi_server, browser, fake_openai, screenshot_dir):
    base = asgi_server.url
    _sign_up(browser, base, "browser-ada")
    assert "Offline demo model" in browser.find_element(By.CSS_SELECTOR, ".model-chip").text

    # 1. The offline model streams a reply token by token; markdown arrives rendered.
    browser.execute_script(WATCH_STREAM)
    reply = _send(browser, "Hello there!\nTell me about the context you received.")
    assert reply.get_attribute("data-status") == "complete"
    text = reply.find_element(By.CSS_SELECTOR, ".msg-content").text
    assert "Offline demo model" in text
    assert len(browser.execute_script("return window.__seen")) > 1, "the reply did not arrive in pieces"
    assert reply.find_elements(By.CSS_SELECTOR, ".msg-content strong, .msg-content li")
    assert browser.current_url.rstrip("/").split("/")[-2] == "c"
    _wait(browser, lambda d: "/" in d.find_element(By.ID, "gauge-text").text)
    user = get_user_model().objects.get(username="browser-ada")
    assert Message.objects.filter(conversation__owner=user, role="assistant", status="complete").count() == 1

    # 2. Hostile markup in a message never runs: not in the user bubble, not in the reply.
    reply = _send(browser, f"Please repeat: {XSS}")
    assert reply.get_attribute("data-status") == "complete"
    assert browser.execute_script("return window.__xss") is None
    bubble = browser.find_elements(By.CSS_SELECTOR, ".msg--user .msg-content")[-1]
    assert "<script>window.__xss=1</script>" in bubble.text

    # 3. Add a real (fake) OpenAI-compatible model in settings; the window comes from the model name.
    base_url, model, note = _add_model_form(browser, base)
    browser.find_element(By.ID, "id_new-name").send_keys("Echo")
    # A provider's own name is looked up under its prefix, which the endpoint's host says.
    base_url.send_keys("https://api.mistral.ai/v1")
    model.send_keys("mistral-large-latest")
    _wait(browser, lambda d: "262,144" in note.text)
    base_url.clear()
    model.clear()
    base_url.send_keys(fake_openai.base_url)
    model.send_keys("gpt-4o-mini")
    _wait(browser, lambda d: "128,000" in note.text)
    assert "model registry" in note.text
    model.clear()
    model.send_keys("fake-echo")
    _wait(browser, lambda d: "not in the registry" in note.text)
    browser.find_element(By.ID, "id_new-api_key").send_keys("sk-browser-test-key-5678")
    window = browser.find_element(By.ID, "id_new-context_window")
    window.send_keys("16000")
    browser.find_element(By.CSS_SELECTOR, "#add-config button[type=submit]").click()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".config-card"))
    card = browser.find_element(By.CSS_SELECTOR, ".config-card")
    assert "••••5678" in card.text
    assert "sk-browser-test-key-5678" not in browser.page_source
    card.find_element(By.CSS_SELECTOR, '[data-action="test-config"]').click()
    result = browser.find_element(By.CSS_SELECTOR, ".test-result")
    _wait(browser, lambda d: "Testing" not in result.text and result.text)
    assert result.text.startswith("✓ Connected to "), result.text
    config = LLMConfig.objects.get(owner=user)
    assert (config.model, config.context_window, config.is_default) == ("fake-echo", 16000, True)

    # 4. Switch to quality; it is kept.
    browser.find_element(By.CSS_SELECTOR, 'label[for="pref-quality"]').click()
    save = browser.find_element(By.ID, "prefs-save")
    save.click()
    # the radio was checked by the click above: wait for the page being left to go, or the refresh
    # below races the POST
    _wait(browser, staleness_of(save))
    _wait(browser, lambda d: d.find_element(By.ID, "pref-quality").is_selected())
    browser.refresh()
    assert browser.find_element(By.ID, "pref-quality").is_selected()
    assert not browser.find_element(By.ID, "pref-balanced").is_selected()
    assert UserSettings.objects.get(user=user).preference == "quality"
    browser.set_window_size(1366, 1500)
    browser.save_screenshot(str(screenshot_dir / "settings.png"))
    browser.set_window_size(390, 844)
    browser.save_screenshot(str(screenshot_dir / "settings-phone.png"))
    browser.set_window_size(1366, 900)

    # 5. Back to the chat, which stays with the offline model until switched (issue 14, finding 8);
    # switched to Echo, the model echoes the hostile text back, and it still does not run.
    browser.find_element(By.CSS_SELECTOR, ".back-link").click()
    _wait(browser, lambda d: d.find_elements(By.ID, "composer-input"))
    picker = Select(browser.find_element(By.ID, "model-select"))
    assert picker.first_selected_option.text == "Offline demo model"
    picker.select_by_visible_text("Echo")
    _wait(browser, lambda d: d.find_element(By.ID, "model-select").get_attribute("data-current") == str(config.pk))
    reply = _send(browser, f"Code time:\n```python\nprint('hi')\n```\n{XSS}")
    assert reply.get_attribute("data-status") == "complete"
    assert "window.__xss=1" in reply.text
    assert browser.execute_script("return window.__xss") is None
    sent = fake_openai.completions[-1]
    assert sent.model == "fake-echo"
    assert "<script>window.__xss=1</script>" in sent.messages[-1]["content"]
    browser.save_screenshot(str(screenshot_dir / "chat.png"))

    # After a reload the server-rendered timeline is just as inert; code blocks get a copy button.
    # A markdown image is a link: loading it would send whatever its URL carries to another server.
    conversation = Message.objects.filter(conversation__owner=user).last().conversation
    leak = fake_openai.base_url.rsplit("/v1", 1)[0] + "/leak?d=SECRET"
    Message.objects.create(conversation=conversation, role="assistant", content=f"![chart]({leak})")
    Message.objects.create(conversation=conversation, role="assistant", content="```python\nprint('hi')\n```")
    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant"))
    assert browser.execute_script("return window.__xss") is None
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg--assistant[data-status=complete]")) == 5
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg-content img")
    assert browser.find_element(By.CSS_SELECTOR, f'.msg-content a[href="{leak}"]').text == "chart"
    assert not [r for r in fake_openai.requests if "/leak" in r.path]
    copy = browser.find_element(By.CSS_SELECTOR, ".code-block .copy-btn")
    assert browser.find_element(By.CSS_SELECTOR, ".code-block .code-lang").text == "python"
    copy.click()
    _wait(browser, lambda d: copy.text != "Copy")
    browser.execute_script("document.getElementById('timeline').scrollTop = 1e9")

    # Phone width: the sidebar collapses behind a toggle.
    browser.set_window_size(390, 844)
    sidebar = browser.find_element(By.ID, "sidebar")
    _wait(browser, lambda d: sidebar.location["x"] < 0)
    browser.execute_script("document.getElementById('timeline').scrollTop = 1e9")
    browser.save_screenshot(str(screenshot_dir / "chat-phone.png"))
    browser.find_element(By.CSS_SELECTOR, ".sidebar-toggle").click()
    _wait(browser, lambda d: sidebar.location["x"] >= 0)
    browser.save_screenshot(str(screenshot_dir / "chat-phone-sidebar.png"))
    browser.set_window_size(1366, 900)
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".code-block"))
    browser.save_screenshot(str(screenshot_dir / "chat-dark.png"))
    assert (screenshot_dir / "chat.png").stat().st_size > 10_000
    # No script errors anywhere along the way.
    assert console_errors(browser) == []


def test_stop_keeps_the_partial_reply_marked_stopped(asgi_server, browser, fake_openai, screenshot_dir):
    base = asgi_server.url
    user, _ = _sign_up_with_model(browser, base, "browser-stop", fake_url=fake_openai.base_url, model="slow-150",
                                  name="Slow")
    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.ID, "composer-input"))
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("Write a long story please")
    box.send_keys(Keys.ENTER)
    stop = browser.find_element(By.ID, "stop-btn")
    _wait(browser, lambda d: stop.is_displayed())
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming .msg-content")
          and d.find_elements(By.CSS_SELECTOR, ".msg--assistant .msg-content")[-1].text.strip())
    # The next message can be written meanwhile; Enter does not send it while the reply streams, and a
    # reply stopped (the user takes over) leaves it in the box.
    box.send_keys("and then?")
    box.send_keys(Keys.ENTER)
    assert not _idle(browser)
    assert box.get_attribute("value") == "and then?"
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg--user")) == 1
    stop.click()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status")
          == "stopped")
    reply = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1]
    assert "Stopped" in reply.find_element(By.CSS_SELECTOR, ".msg-meta").text
    assert reply.find_element(By.CSS_SELECTOR, ".msg-content").text.strip()
    # stopping is not a failure: no error box or Retry, the same as after a reload (issue 14, 11)
    assert not reply.find_elements(By.CSS_SELECTOR, ".msg-error")
    _wait(browser, _idle)
    assert box.get_attribute("value") == "and then?"  # the draft is still there, to send now
    stored = Message.objects.get(conversation__owner=user, role="assistant")
    assert stored.status == Message.Status.STOPPED
    assert stored.content
    browser.refresh()
    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-stopped"))[0]
    assert "Stopped" in reply.text
    assert not reply.find_elements(By.CSS_SELECTOR, ".msg-error")


def test_on_a_phone_a_streaming_reply_says_what_the_open_box_does(asgi_server, browser, fake_openai):
    """At 375 px the busy hint shows (the other hints are hidden there), the box is described by it,
    and Regenerate pressed meanwhile says why it waits instead of doing nothing."""
    browser.set_window_size(375, 812)
    _sign_up_with_model(browser, asgi_server.url, "browser-phone-busy", fake_url=fake_openai.base_url,
                        model="slow-150", name="Slow")
    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.ID, "composer-input"))
    _send(browser, "first")
    box = browser.find_element(By.ID, "composer-input")
    assert box.get_attribute("aria-describedby") == "composer-hint"
    box.send_keys("second")
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: not _idle(d))
    busy = browser.find_element(By.ID, "composer-hint-busy")
    assert busy.is_displayed() and "type your next message" in busy.text
    assert box.get_attribute("aria-describedby") == "composer-hint-busy"
    # Enter waits, and says what it waits for: the draft kept, or (an empty box) only how to stop.
    status = browser.find_element(By.ID, "stream-status")
    box.send_keys("third", Keys.ENTER)
    _wait(browser, lambda d: "your message is sent when it ends" in status.get_attribute("textContent"))
    assert "sent when this reply is complete" in busy.text
    box.send_keys(Keys.ENTER)  # the same words again are cleared first, so they are said again
    _wait(browser, lambda d: status.get_attribute("textContent") == "")
    _wait(browser, lambda d: "your message is sent when it ends" in status.get_attribute("textContent"))
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)  # emptied: nothing waits to be sent any more
    _wait(browser, lambda d: "type your next message" in busy.text)
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: status.get_attribute("textContent") == "The reply is still being written. Esc stops it.")
    regenerate = browser.find_elements(By.CSS_SELECTOR, '.msg--assistant [data-action="regenerate"]')[0]
    browser.execute_script("arguments[0].click()", regenerate)
    _wait(browser, lambda d: "still being written" in d.find_element(By.ID, "toasts").text)
    browser.find_element(By.ID, "stop-btn").click()
    _wait(browser, _idle)
    assert box.get_attribute("aria-describedby") == "composer-hint"
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")) == 2  # nothing regenerated
    browser.set_window_size(1366, 900)


def test_enter_while_a_reply_streams_sends_the_message_when_it_ends(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "browser-queued", fake_url=fake_openai.base_url,
                        model="slow-300", name="Slow")
    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.ID, "composer-input"))
    _send(browser, "first question")  # a new chat's first reply: followed after the page becomes the chat's
    _wait(browser, _idle, timeout=30)
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("second question", Keys.ENTER)
    _wait(browser, lambda d: not _idle(d))
    box.send_keys("the follow-up", Keys.ENTER)
    assert box.get_attribute("value") == "the follow-up"  # still the user's to edit until the reply ends
    box.send_keys(", edited meanwhile")
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg--user")) == 3, timeout=30)
    assert [m.text for m in browser.find_elements(By.CSS_SELECTOR, ".msg--user .msg-content")] == [
        "first question", "second question", "the follow-up, edited meanwhile"]
    assert box.get_attribute("value") == ""
    _wait(browser, _idle, timeout=30)
    replies = Message.objects.filter(role="assistant").order_by("id")
    assert [m.status for m in replies] == ["complete"] * 3  # the one written meanwhile ran to its end


def test_a_message_too_long_for_the_window_is_marked_sent_shortened(asgi_server, browser, fake_openai):
    _, config = _sign_up_with_model(browser, asgi_server.url, "log-paster", fake_url=fake_openai.base_url,
                                    model="gpt-4o-mini", name="Small")
    LLMConfig.objects.filter(pk=config.pk).update(context_window=4_000)
    browser.refresh()
    box = _wait(browser, lambda d: d.find_elements(By.ID, "composer-input"))[0]
    pasted = "\n".join(f"Line {i} of the log: service {i % 7} answered in {i * 3} ms." for i in range(600))
    browser.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))",
                           box, pasted)
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--user .badge--shortened"), timeout=30)
    assert browser.find_element(By.CSS_SELECTOR, ".msg--user .badge--shortened").text == "Sent shortened"
    browser.find_element(By.ID, "gauge").click()
    _wait(browser, lambda d: "too long for this budget" in d.find_element(By.ID, "gauge-details").text)
    # Nothing was left out: the panel says so, not that turns were dropped.
    assert "Nothing left out" in browser.find_element(By.ID, "gauge-details").text
    assert "dropped" not in browser.find_element(By.ID, "gauge-details").text
    browser.refresh()  # the page's first gauge marks it too
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--user .badge--shortened"))


def test_rejected_send_is_reported_inline_and_the_text_is_kept(asgi_server, browser, settings):
    settings.SEND_RATE_LIMIT_PER_MINUTE = 1
    _sign_up(browser, asgi_server.url, "browser-limit")
    assert _send(browser, "first").get_attribute("data-status") == "complete"
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("second, too soon")
    box.send_keys(Keys.ENTER)
    error = _wait(browser, lambda d: d.find_elements(By.ID, "composer-error"))[0]
    assert error.text.strip()
    assert browser.find_element(By.ID, "composer-input").get_attribute("value") == "second, too soon"
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg--user")) == 1
    user = get_user_model().objects.get(username="browser-limit")
    assert Message.objects.filter(conversation__owner=user, role="user").count() == 1


def test_retry_after_a_failure_then_regenerate_and_pin(asgi_server, browser, fake_openai, screenshot_dir):
    base = asgi_server.url
    _sign_up_with_model(browser, base, "browser-retry", fake_url=fake_openai.base_url, model="flaky-500-then-200",
                        name="Flaky")
    fake_openai.reset()
    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.ID, "composer-input"))

    # The endpoint fails: the user's message stays, the error is inline in plain words with Retry.
    failed = _send(browser, "What is a token bucket?")
    assert failed.get_attribute("data-status") == "error"
    error = failed.find_element(By.CSS_SELECTOR, ".msg-error")
    assert error.text.strip()
    assert "Traceback" not in error.text
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")) == 1

    # Retry answers; the failed reply is kept as another version of the reply (issue 13: "2/2" on the new
    # one reaches it), no longer in the path shown.
    failed_id = int(failed.get_attribute("data-id"))
    error.find_element(By.CSS_SELECTOR, '[data-action="retry"]').click()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status")
          == "complete" and not d.find_elements(By.CSS_SELECTOR, f"#m-{failed_id}"))
    first_answer = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1]
    assert "Echo:" in first_answer.text
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg--user")) == 1
    assert first_answer.find_element(By.CSS_SELECTOR, ".msg-branches-pos").text == "2/2"
    first_id = int(first_answer.get_attribute("data-id"))

    # Regenerate (after a reset the next request fails again, so it is retried): the replaced reply
    # stays as another version (issue 13: it used to stay in the timeline, dimmed and labelled).
    fake_openai.reset()
    first_answer.find_element(By.CSS_SELECTOR, '[data-action="regenerate"]').click()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status")
          in {"complete", "error"})
    latest = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1]
    if latest.get_attribute("data-status") == "error":
        latest.find_element(By.CSS_SELECTOR, '[data-action="retry"]').click()
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute(
            "data-status") == "complete")
    assert Message.objects.get(pk=first_id).superseded
    browser.refresh()
    positions = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant .msg-branches-pos"))
    assert not browser.find_elements(By.CSS_SELECTOR, f"#m-{first_id}")
    index, count = positions[-1].text.split("/")
    assert index == count and int(count) >= 3  # the failed reply, the first answer, the regenerated one

    # Pin the question from its menu.
    question = browser.find_element(By.CSS_SELECTOR, ".msg--user")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", question)
    question.find_element(By.CSS_SELECTOR, '[data-action="message-menu"]').click()
    question.find_element(By.CSS_SELECTOR, '[data-action="toggle-pin"]').click()
    _wait(browser, lambda d: question.get_attribute("data-pinned") == "1")
    assert Message.objects.get(pk=int(question.get_attribute("data-id"))).pinned
    browser.save_screenshot(str(screenshot_dir / "chat-regenerated.png"))


def test_renaming_a_chat_with_the_keyboard_keeps_the_focus(asgi_server, browser):
    """Enter or Esc in the rename field: the title is saved (or kept) and focus goes back to the
    Rename button it came from, not to the page."""
    _sign_up(browser, asgi_server.url, "browser-rename")
    _send(browser, "A chat to rename.")
    for button_css, key in (
        ('[data-action="rename-current"]', Keys.ENTER),  # saved
        (".conv-item [data-action='rename-conversation']", Keys.ESCAPE),  # kept as it was
    ):
        button = browser.find_element(By.CSS_SELECTOR, button_css)
        browser.execute_script("arguments[0].focus()", button)
        ActionChains(browser).send_keys(Keys.ENTER).perform()  # the button, pressed from the keyboard
        field = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".title-input, .conv-rename"))
        field.send_keys(Keys.CONTROL, "a")
        field.send_keys("Renamed by keyboard", key)
        _wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, ".title-input, .conv-rename"))
        assert browser.switch_to.active_element == button
        _wait(browser, lambda d: d.find_element(By.ID, "chat-title").text == "Renamed by keyboard")
    assert console_errors(browser) == []


def test_a_regenerated_reply_streams_in_the_old_ones_place(asgi_server, browser, fake_openai):
    """While the new reply streams it stands where the old one stood, under the same question; the
    old one is out of view (it used to stay above the new one until the stream ended)."""
    _sign_up_with_model(browser, asgi_server.url, "browser-regen", fake_url=fake_openai.base_url,
                        model="slow-120", name="Slow")
    browser.get(asgi_server.url + "/c/new/")
    old = _send(browser, "Name a colour.")
    old_id = old.get_attribute("data-id")
    browser.execute_script("arguments[0].click()", old.find_element(By.CSS_SELECTOR, '[data-action="regenerate"]'))
    _wait(browser, lambda d: not _idle(d))
    shown = [m for m in browser.find_elements(By.CSS_SELECTOR, ".msg--assistant") if m.is_displayed()]
    assert len(shown) == 1 and shown[0].get_attribute("data-id") != old_id
    assert not browser.find_element(By.ID, f"m-{old_id}").is_displayed()
    _wait(browser, _idle)
    # The old one leaves the page once the stream's end is handled, which awaits the gauge's refresh
    # (a request) after the page is idle again: wait for it, then check what is left.
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg--assistant")) == 1)
    replies = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")
    assert len(replies) == 1 and replies[0].get_attribute("data-status") == "complete"
    _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg--assistant .msg-branches-pos").text == "2/2")
    assert console_errors(browser) == []


def test_retry_leaves_an_older_failed_reply_once_a_new_turn_starts(asgi_server, browser, fake_openai):
    """Retry acts on the latest exchange only (the server refuses the others): an older failed
    reply loses its button when the next message is sent, as Regenerate already did."""
    _, config = _sign_up_with_model(browser, asgi_server.url, "stale-retry-checker", fake_url=fake_openai.base_url,
                                    model="fail-500", name="Failing")
    browser.get(asgi_server.url + "/c/new/")
    failed = _send(browser, "This one fails.")
    assert failed.get_attribute("data-status") == "error"
    assert failed.find_element(By.CSS_SELECTOR, '[data-action="retry"]').is_displayed()
    config.model = "fake-echo"
    config.save(update_fields=["model"])
    assert _send(browser, "This one works.").get_attribute("data-status") == "complete"
    assert not [b for b in failed.find_elements(By.CSS_SELECTOR, '[data-action="retry"]') if b.is_displayed()]
    browser.refresh()  # the page as the server draws it: the same
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-last"))
    assert len(browser.find_elements(By.CSS_SELECTOR, '[data-action="retry"]')) == 0
    assert console_errors(browser) == []


def test_a_wide_table_scrolls_sideways_on_a_phone(asgi_server, browser):
    """Seven columns at 375 px: the table scrolls; no column is squeezed to a letter or two a line."""
    _sign_up(browser, asgi_server.url, "wide-table-reader")
    user = get_user_model().objects.get(username="wide-table-reader")
    conversation = Conversation.objects.create(owner=user, title="Table", offline=True)
    head = "| " + " | ".join(f"column {i}" for i in range(7)) + " |"
    rows = "\n".join("| " + " | ".join(f"cell-content-long {r}{c}" for c in range(7)) + " |" for r in range(3))
    Message.objects.create(conversation=conversation, role="user", content="A table, please.")
    Message.objects.create(conversation=conversation, role="assistant",
                           content=f"{head}\n|{'---|' * 7}\n{rows}")
    browser.set_window_size(375, 812)
    try:
        browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
        table = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg--assistant .md table"))
        scroll, client = browser.execute_script("return [arguments[0].scrollWidth, arguments[0].clientWidth]", table)
        assert scroll > client  # it scrolls sideways...
        narrowest = browser.execute_script(
            "return Math.min(...[...arguments[0].querySelectorAll('td')].map((c) => c.getBoundingClientRect().width))",
            table)
        assert narrowest > 60  # ...instead of squeezing its columns
    finally:
        browser.set_window_size(1366, 900)


def test_a_menu_is_used_from_the_keyboard(asgi_server, browser):
    """Enter opens the chat's ⋯ menu on its first item; ↓ ↑ move between items (wrapping), and Esc
    closes it with the focus back on its button."""
    _sign_up(browser, asgi_server.url, "menu-keyboard-user")
    _send(browser, "A chat with a menu.")
    button = browser.find_element(By.CSS_SELECTOR, '[data-action="conv-menu"]')
    browser.execute_script("arguments[0].focus()", button)
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    menu = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, '[data-action="conv-menu"] + .menu'))
    items = [i for i in menu.find_elements(By.CSS_SELECTOR, "[role='menuitem']") if i.is_displayed()]
    assert len(items) > 2 and browser.switch_to.active_element == items[0]
    ActionChains(browser).send_keys(Keys.ARROW_DOWN).perform()
    assert browser.switch_to.active_element == items[1]
    ActionChains(browser).send_keys(Keys.ARROW_UP, Keys.ARROW_UP).perform()
    assert browser.switch_to.active_element == items[-1]
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    _wait(browser, lambda d: not menu.is_displayed())
    assert browser.switch_to.active_element == button


def test_retry_is_held_for_the_wait_a_rate_limit_names(asgi_server, browser, fake_openai):
    """A 429 with Retry-After: 5 says "Wait 5 seconds and retry."; its Retry button is held that long
    (a click sooner would be refused again), then offered."""
    _sign_up_with_model(browser, asgi_server.url, "rate-limited-retry", fake_url=fake_openai.base_url,
                        model="fail-429-wait-5", name="Limited")
    browser.get(asgi_server.url + "/c/new/")
    failed = _send(browser, "Are you there?")
    assert "Wait 5 seconds" in failed.find_element(By.CSS_SELECTOR, ".msg-error-text").text
    retry = failed.find_element(By.CSS_SELECTOR, '[data-action="retry"]')
    assert not retry.is_enabled()
    _wait(browser, lambda d: retry.is_enabled())
    assert console_errors(browser) == []
