"""A control pressed from the keyboard that goes away with what it acted on hands the focus on,
never to the page (<body>): Regenerate, Retry and Save & submit (their message is replaced), an
item of a ⋯ menu (the menu closes), Delete on another chat in the list (its row goes), the jump
button (it hides). Headless Chromium reports no hovering pointer, as a phone or a keyboard-only
set-up does, so the end of a reply does not put focus back in the message box by itself here."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from chatapp.chat.branch_services import conversation_path_thread
from chatapp.chat.models import Conversation, Message
from chatapp.providers.models import LLMConfig
from tests.support.browser import console_errors
from tests.ui.test_browser import _idle, _send, _sign_up, _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _press(browser, element, key=Keys.ENTER) -> None:
    """A keyboard user: focus on the control, then the key."""
    browser.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", element)
    browser.execute_script("arguments[0].focus()", element)
    ActionChains(browser).send_keys(key).perform()


def _focused_id(browser) -> str:
    return browser.execute_script("const a = document.activeElement; return a.id || a.tagName")


def _reply_done(browser) -> bool:
    last = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1]
    return _idle(browser) and last.get_attribute("data-status") in {"complete", "stopped", "error"}


def test_regenerate_and_save_and_submit_leave_the_focus_in_the_message_box(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "focus-replies")
    _send(browser, "First question.")
    _send(browser, "Second question.")

    regenerate = browser.find_elements(By.CSS_SELECTOR, '.msg--assistant [data-action="regenerate"]')[-1]
    _press(browser, regenerate)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant .msg-branches"))
    _wait(browser, _reply_done)
    assert _focused_id(browser) == "composer-input"  # was BODY

    first = browser.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")[0]
    _press(browser, first.find_element(By.CSS_SELECTOR, '[data-action="edit-message"]'))
    editor = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    assert browser.switch_to.active_element == editor
    editor.send_keys(" Asked again.")
    editor.send_keys(Keys.ENTER)
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")) == 1
          and "Asked again." in d.find_element(By.CSS_SELECTOR, ".msg--user").text)
    _wait(browser, _reply_done)
    assert _focused_id(browser) == "composer-input"  # was BODY


def test_retry_leaves_the_focus_in_the_message_box(asgi_server, browser, fake_openai):
    fake_openai.reset()  # the first request answers 500, the next one succeeds
    _sign_up_with_model(browser, asgi_server.url, "focus-retry", fake_url=fake_openai.base_url,
                        model="flaky-500-then-200", name="Flaky")
    failed = _send(browser, "Hello?")
    assert failed.get_attribute("data-status") == "error"

    _press(browser, failed.find_element(By.CSS_SELECTOR, '.msg-error [data-action="retry"]'))
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status")
          == "complete" and _idle(d))
    assert _focused_id(browser) == "composer-input"  # was BODY


def test_a_menu_item_chosen_from_the_keyboard_gives_the_focus_back_to_the_menu_button(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "focus-menu")
    _send(browser, "Keep this one.")
    question = browser.find_element(By.CSS_SELECTOR, ".msg--user[data-id]")
    menu_button = question.find_element(By.CSS_SELECTOR, '[data-action="message-menu"]')
    _press(browser, menu_button)
    item = _wait(browser, lambda d: d.switch_to.active_element
                 if d.switch_to.active_element.get_attribute("data-action") == "toggle-pin" else None)
    item.send_keys(Keys.ENTER)

    _wait(browser, lambda d: "is-pinned" in question.get_attribute("class"))
    assert browser.switch_to.active_element == menu_button  # was BODY
    assert menu_button.get_attribute("aria-expanded") == "false"
    assert Message.objects.get(pk=int(question.get_attribute("data-id"))).pinned
    # The reply may still be streaming: its request must end before the test's database is flushed.
    _wait(browser, _reply_done)


def _confirm(browser, button_id=None):
    """The confirm dialog once open: the focused button (Cancel, first), or the one named."""
    def shown(d):
        if not d.find_element(By.ID, "confirm-dialog").get_attribute("open"):
            return None
        return d.find_element(By.ID, button_id) if button_id else d.switch_to.active_element
    return _wait(browser, shown)


def _tab_to_delete(browser, row):
    """A keyboard user at a chat's Delete: the row's buttons show once the row holds the focus, Tab from
    its link to Pin, Archive, Rename, then Delete."""
    _press(browser, row.find_element(By.CSS_SELECTOR, ".conv-link"), Keys.TAB)
    for _ in range(3):
        ActionChains(browser).send_keys(Keys.TAB).perform()
    delete = browser.switch_to.active_element
    assert delete.get_attribute("data-action") == "delete-conversation"
    return delete


def test_deleting_another_chat_moves_the_focus_to_the_next_one_in_the_list(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "focus-delete")
    user = get_user_model().objects.get(username="focus-delete")
    for title in ("Oldest chat", "Middle chat", "Newest chat"):
        Conversation.objects.create(owner=user, title=title)
    browser.get(asgi_server.url + "/c/new/")
    titles = lambda d: [t.text for t in d.find_elements(By.CSS_SELECTOR, ".conv-item .conv-title")]  # noqa: E731
    _wait(browser, lambda d: titles(d) == ["Newest chat", "Middle chat", "Oldest chat"])

    def tab_to_delete(title):
        row = browser.find_element(By.XPATH, f'//li[contains(@class, "conv-item")][.//*[text()="{title}"]]')
        return _tab_to_delete(browser, row)

    delete = tab_to_delete("Middle chat")
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _confirm(browser).send_keys(Keys.ENTER)  # Cancel has the focus first: focus comes back to Delete
    _wait(browser, lambda d: not d.find_element(By.ID, "confirm-dialog").get_attribute("open"))
    assert browser.switch_to.active_element == delete  # was BODY: the row's buttons had hidden meanwhile
    # Delete again at once: the dialog may reopen before the browser fires the close event of that
    # Cancel, which then answered this opening "no" (the chat stayed, one run in three).
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _confirm(browser, "confirm-ok").send_keys(Keys.ENTER)
    _wait(browser, lambda d: titles(d) == ["Newest chat", "Oldest chat"])
    focused = browser.switch_to.active_element
    assert focused.get_attribute("class") == "conv-link"  # was BODY
    assert focused.text == "Oldest chat"

    for title, focus_goes_to in (("Oldest chat", "Newest chat"), ("Newest chat", "New chat")):
        tab_to_delete(title)  # the last in the list: the one before it; then none left: "New chat"
        ActionChains(browser).send_keys(Keys.ENTER).perform()
        _confirm(browser, "confirm-ok").send_keys(Keys.ENTER)
        _wait(browser, lambda d, gone=title: gone not in titles(d))
        assert browser.switch_to.active_element.text == focus_goes_to
    assert browser.switch_to.active_element.get_attribute("id") == "new-chat"
    _wait(browser, lambda d: d.find_element(By.ID, "conv-nav").text == "No chats yet. Start one below.")
    assert not Conversation.objects.filter(owner=user).exists()
    assert console_errors(browser) == []


def test_a_confirmation_asked_again_before_the_last_close_event_gets_its_own_answer(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "confirm-again")
    # The browser queues a dialog's close event and may run a key press first: Cancel, then Delete
    # again at once, can reopen the dialog before the close event of that Cancel. Here in a fixed
    # order (a keyboard test meets it only sometimes): Cancel, reopened, the late event, then OK.
    answers = browser.execute_async_script("""
      const done = arguments[arguments.length - 1];
      const dialog = document.getElementById("confirm-dialog");
      const first = Longchat.confirmAction("First?");
      dialog.querySelector('[value="cancel"]').click();
      const second = Longchat.confirmAction("Second?");
      let lateClose = null;
      dialog.addEventListener("close", () => {
        if (lateClose !== null) return;
        lateClose = dialog.open ? "came with the dialog open again" : "came before the reopening";
        dialog.querySelector("#confirm-ok").click();
      });
      Promise.all([first, second]).then((both) => done([...both, lateClose]));
    """)
    assert answers == [False, True, "came with the dialog open again"]  # was [False, False, …]: OK unheard
    assert console_errors(browser) == []


def test_the_jump_button_goes_when_an_edit_leaves_nothing_to_scroll(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "focus-jump")
    for n in range(3):
        _send(browser, f"Question number {n}.")
    timeline = browser.find_element(By.ID, "timeline")
    assert browser.execute_script("return arguments[0].scrollHeight > arguments[0].clientHeight + 200", timeline)
    browser.execute_script("arguments[0].style.scrollBehavior = 'auto'; arguments[0].scrollTop = 0", timeline)
    jump = browser.find_element(By.ID, "jump-btn")
    _wait(browser, lambda d: jump.is_displayed())

    # Editing the first question replaces everything below it: one short exchange is left.
    first = browser.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")[0]
    _press(browser, first.find_element(By.CSS_SELECTOR, '[data-action="edit-message"]'))
    editor = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    editor.send_keys(Keys.ENTER)
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")) == 1)
    _wait(browser, _reply_done)
    assert browser.execute_script("return arguments[0].scrollHeight <= arguments[0].clientHeight + 160", timeline)
    assert not jump.is_displayed()  # it stayed, pointing at nothing further down

    # Pressed from the keyboard, it hands the focus to the message box as it hides.
    _send(browser, "Another question.")
    _send(browser, "And one more.")
    browser.execute_script("arguments[0].style.scrollBehavior = 'auto'; arguments[0].scrollTop = 0", timeline)
    _wait(browser, lambda d: jump.is_displayed())
    _press(browser, jump)
    _wait(browser, lambda d: not jump.is_displayed())
    assert _focused_id(browser) == "composer-input"  # was BODY


def test_send_and_stop_pressed_from_the_keyboard_hand_the_focus_on(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "focus-send-stop", fake_url=fake_openai.base_url,
                        model="slow-150", name="Slow")
    browser.get(asgi_server.url + "/c/new/")
    box = _wait(browser, lambda d: d.find_element(By.ID, "composer-input"))
    box.send_keys("Tell me a long story")
    ActionChains(browser).send_keys(Keys.TAB).perform()
    assert _focused_id(browser) == "send-btn"
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant[data-id].is-streaming"))
    assert _focused_id(browser) == "stop-btn"  # was BODY: Send hid as Stop took its place

    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _wait(browser, _reply_done)
    assert browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status") == "stopped"
    assert _focused_id(browser) == "composer-input"  # was BODY: Stop hid as the reply ended


def test_switching_the_model_with_the_arrow_keys_keeps_the_focus_on_the_menu(asgi_server, browser, fake_openai):
    user, alpha = _sign_up_with_model(browser, asgi_server.url, "focus-picker", fake_url=fake_openai.base_url,
                                      model="fake-echo", name="Alpha")
    beta = LLMConfig.objects.create(owner=user, name="Beta", base_url=fake_openai.base_url, model="fake-echo",
                                    context_window=16_000, max_output_tokens=500)
    browser.get(asgi_server.url + "/c/new/")
    _send(browser, "Hello")
    picker = browser.find_element(By.ID, "model-select")
    assert Select(picker).first_selected_option.text == "Alpha"
    saved = lambda pk: lambda d: picker.get_attribute("data-current") == str(pk) and not picker.get_attribute(  # noqa: E731
        "disabled")
    _press(browser, picker, Keys.ARROW_DOWN)
    _wait(browser, saved(beta.pk))
    assert Select(picker).first_selected_option.text == "Beta"
    assert _focused_id(browser) == "model-select"  # was BODY: disabled while saved, it dropped the focus
    ActionChains(browser).send_keys(Keys.ARROW_UP).perform()  # the next arrow still reaches it
    _wait(browser, saved(alpha.pk))
    assert _focused_id(browser) == "model-select"


def test_load_earlier_from_the_keyboard_keeps_the_focus_in_the_timeline(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "focus-earlier")
    user = get_user_model().objects.get(username="focus-earlier")
    conversation = Conversation.objects.create(owner=user, title="Long enough")
    for i in range(230):
        content = f"message number {i}"
        Message.objects.create(conversation=conversation, role="user" if i % 2 == 0 else "assistant",
                               content=content, token_count=4, char_count=len(content))
    conversation_path_thread(conversation_id=conversation.pk)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    button = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, '[data-action="load-earlier"]'))
    shown = lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg[data-id]"))  # noqa: E731
    assert shown(browser) == 100

    _press(browser, button)
    _wait(browser, lambda d: shown(d) == 200 and not button.get_attribute("disabled"))
    assert browser.switch_to.active_element == button  # was BODY: disabled while loading

    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _wait(browser, lambda d: shown(d) == 230 and not d.find_elements(By.CSS_SELECTOR, '[data-action="load-earlier"]'))
    focused = browser.switch_to.active_element  # was BODY: the button went, nothing earlier is left
    assert "msg" in focused.get_attribute("class").split()
    assert "message number 29" in focused.text  # the newest of those just loaded, right above the rest


# A desktop with a mouse, where the end of a reply puts the focus back in the message box: headless
# Chromium says it has no hovering pointer, so (hover: hover) is made to match, as on any desktop.
_DESKTOP_POINTER = """
  const real = window.matchMedia.bind(window);
  window.matchMedia = (q) => q.replace(/\\s/g, '') === '(hover:hover)' ? real('all') : real(q);
"""


def test_the_end_of_a_reply_leaves_a_field_being_typed_in_alone(asgi_server, browser, fake_openai):
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _DESKTOP_POINTER})
    _sign_up_with_model(browser, asgi_server.url, "typing-elsewhere", fake_url=fake_openai.base_url,
                        model="slow-150", name="Slow echo")
    browser.get(f"{asgi_server.url}/")
    _send(browser, "first question about nginx")
    assert _focused_id(browser) == "composer-input"  # nothing else was being typed in: back to the box

    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("rotate the nginx logs every night, please", Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming"))
    search = browser.find_element(By.ID, "chat-search")
    search.click()
    search.send_keys("postgres back")
    assert browser.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming")  # typed while it streamed
    _wait(browser, lambda d: _reply_done(d) and len(d.find_elements(By.CSS_SELECTOR, ".msg--assistant")) == 2)

    # the reply ended while the search was being typed: the rest of the words go on into the search
    ActionChains(browser).send_keys("ups").perform()
    assert search.get_attribute("value") == "postgres backups"
    assert box.get_attribute("value") == ""


def open_code_chat(browser, base: str, username: str) -> None:
    """A new user's chat whose reply holds a code block, opened in the browser."""
    _sign_up(browser, base, username)
    user = get_user_model().objects.get(username=username)
    conversation = Conversation.objects.create(owner=user, title="Code")
    Message.objects.create(conversation=conversation, role="user", content="Show me some code.")
    Message.objects.create(conversation=conversation, role="assistant", content="Here:\n\n```python\nprint('hi')\n```")
    browser.get(f"{base}/c/{conversation.pk}/")


# A page served over plain HTTP on a network (a self-hosted box at http://192.168.1.5:8000) is not a
# secure context: the browser has no navigator.clipboard, and copying goes through a hidden text area.
NO_CLIPBOARD_API = "Object.defineProperty(navigator, 'clipboard', {value: undefined, configurable: true});"


def test_copy_without_the_clipboard_api_keeps_the_focus_on_the_button(asgi_server, browser):
    """The fallback's hidden text area took the focus to select its text and was removed: the focus fell
    to the page after every Copy (a message, a code block) pressed from the keyboard."""
    open_code_chat(browser, asgi_server.url, "copy-over-http")
    browser.execute_script(NO_CLIPBOARD_API)
    copy_message = browser.find_elements(By.CSS_SELECTOR, '.msg--assistant [data-action="copy-message"]')[-1]
    _press(browser, copy_message)
    _wait(browser, lambda d: any("Copied" in t.text for t in d.find_elements(By.CSS_SELECTOR, ".toast")))
    assert browser.switch_to.active_element == copy_message

    copy_code = browser.find_elements(By.CSS_SELECTOR, '.msg--assistant [data-action="copy-code"]')[-1]
    _press(browser, copy_code)
    _wait(browser, lambda d: copy_code.text == "Copied")
    assert browser.switch_to.active_element == copy_code
    assert console_errors(browser) == []
