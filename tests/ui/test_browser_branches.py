"""Edit and branches in headless Chromium (issue 13): Edit on a user message opens it in place, Save &
submit streams a reply to the new version and shows "< 2/2 >"; the arrows switch the path shown, the
whole branch below coming back with the version; Cancel leaves the message as it was."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Conversation, Message
from tests.support.browser import console_errors
from tests.support.chat import post_stream, seed_messages
from tests.ui.test_browser import _send, _sign_up, _wait


def _texts(browser) -> list[str]:
    return [el.get_attribute("value") for el in browser.find_elements(By.CSS_SELECTOR, ".msg .msg-source")]


def _user_messages(browser):
    return browser.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")


def _message(browser, message_id: str):
    # By its id, found afresh: the timeline re-renders a message in place (a reply's end, a branch
    # switch), and an element held from before may have left the document.
    return browser.find_element(By.ID, f"m-{message_id}")


def _click(browser, element) -> None:
    # Message actions appear on hover: scroll the button into view and click it as a user would.
    browser.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", element)
    browser.execute_script("arguments[0].click()", element)


def test_edit_a_message_then_switch_between_versions(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "browser-branches")
    _send(browser, "Tell me about apples.")
    _send(browser, "And about pears?")
    _send(browser, "Finally, plums.")
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg-branches")
    second_id = _user_messages(browser)[1].get_attribute("data-id")

    # Edit, then Cancel: nothing changes.
    _click(browser, _message(browser, second_id).find_element(By.CSS_SELECTOR, '[data-action="edit-message"]'))
    editor = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    assert editor.get_attribute("value") == "And about pears?"
    assert browser.switch_to.active_element == editor
    # The editor takes the row's width, not the short bubble's.
    row = browser.find_element(By.CSS_SELECTOR, ".timeline-inner").size["width"]
    assert editor.size["width"] > 0.6 * row
    _click(browser, browser.find_element(By.CSS_SELECTOR, '[data-action="edit-cancel"]'))
    _wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, ".msg-edit"))
    assert len(_user_messages(browser)) == 3
    # Esc closes it too, and focus goes back to the Edit button it came from, not to the page.
    edit_button = _message(browser, second_id).find_element(By.CSS_SELECTOR, '[data-action="edit-message"]')
    browser.execute_script("arguments[0].focus()", edit_button)  # a keyboard user: focus, then Enter
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input")).send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, ".msg-edit"))
    assert browser.switch_to.active_element == edit_button

    # Edit and Save & submit: the new version streams its reply; what followed the old one goes.
    _click(browser, _message(browser, second_id).find_element(By.CSS_SELECTOR, '[data-action="edit-message"]'))
    editor = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    editor.clear()
    editor.send_keys("And about cherries?")
    browser.find_element(By.CSS_SELECTOR, ".msg-edit button[type=submit]").click()
    _wait(browser, lambda d: len(_user_messages(d)) == 2
          and d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status") == "complete")
    edited_id = _user_messages(browser)[1].get_attribute("data-id")
    assert "And about cherries?" in _message(browser, edited_id).text
    assert not any("plums" in t for t in _texts(browser))
    _wait(browser, lambda d: _message(d, edited_id).find_element(By.CSS_SELECTOR, ".msg-branches-pos").text == "2/2")
    assert Message.objects.get(pk=int(second_id)).superseded

    # The same after a reload, and "previous" brings back the first version with everything that followed it.
    browser.refresh()
    _wait(browser, lambda d: _message(d, edited_id).find_elements(By.CSS_SELECTOR, ".msg-branches"))
    previous = _message(browser, edited_id).find_element(By.CSS_SELECTOR, '[data-action="branch-prev"]')
    assert previous.get_attribute("aria-label") == "Previous version (1 of 2)"
    at_the_end = _message(browser, edited_id).find_element(By.CSS_SELECTOR, '[data-action="branch-next"]')
    assert at_the_end.get_attribute("disabled")
    assert at_the_end.get_attribute("aria-label") == "Next version (this is the last of 2)"
    _click(browser, _message(browser, edited_id).find_element(By.CSS_SELECTOR, '[data-action="branch-prev"]'))
    _wait(browser, lambda d: any("plums" in t for t in _texts(d)))
    assert len(_user_messages(browser)) == 3
    assert not any("cherries" in t for t in _texts(browser))
    assert _message(browser, second_id).find_element(By.CSS_SELECTOR, ".msg-branches-pos").text == "1/2"

    # "next" goes back to the edited version.
    _click(browser, _message(browser, second_id).find_element(By.CSS_SELECTOR, '[data-action="branch-next"]'))
    _wait(browser, lambda d: any("cherries" in t for t in _texts(d)) and not any("plums" in t for t in _texts(d)))

    # ↑ in the empty composer opens the last message for editing; Enter submits it as a new version.
    composer = browser.find_element(By.ID, "composer-input")
    composer.click()
    composer.send_keys(Keys.ARROW_UP)
    editor = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    assert editor.get_attribute("value") == "And about cherries?"
    editor.send_keys(Keys.ESCAPE)  # opened from the message box: focus goes back there
    _wait(browser, lambda d: d.switch_to.active_element == composer)
    composer.send_keys(Keys.ARROW_UP)
    editor = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    editor.send_keys(" And grapes.", Keys.ENTER)
    _wait(browser, lambda d: any("grapes" in t for t in _texts(d))
          and d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status") == "complete")
    last_id = _user_messages(browser)[-1].get_attribute("data-id")
    _wait(browser, lambda d: _message(d, last_id).find_element(By.CSS_SELECTOR, ".msg-branches-pos").text == "3/3")
    assert console_errors(browser) == []


def _focused_action(browser) -> tuple[str | None, str | None]:
    """The focused control's action and the message it is in."""
    return tuple(browser.execute_script(
        "const a = document.activeElement;"
        "return [a.dataset.action || null, a.closest('.msg')?.dataset.id || null];"))


def test_a_version_switched_from_the_keyboard_keeps_the_focus_on_its_arrows(asgi_server, browser):
    """The switch reloads the page, whose focus went to the message box: a keyboard user who pressed
    "previous" had to find the arrows again (Shift+Tab through every control below) to step on or back."""
    _sign_up(browser, asgi_server.url, "branch-keys")
    first = _send(browser, "Tell me about apples.")
    first_id = first.get_attribute("data-id")
    _click(browser, first.find_element(By.CSS_SELECTOR, '[data-action="regenerate"]'))
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-id")
          not in (None, first_id)
          and d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status") == "complete")
    second_id = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-id")
    previous = _wait(browser, lambda d: _message(d, second_id).find_element(
        By.CSS_SELECTOR, '[data-action="branch-prev"]'))
    browser.execute_script("arguments[0].focus()", previous)
    ActionChains(browser).send_keys(Keys.ENTER).perform()

    # On the first version "previous" is disabled: the focus is on "next", which leads back.
    _wait(browser, lambda d: _focused_action(d) == ("branch-next", first_id))
    assert _message(browser, first_id).find_element(By.CSS_SELECTOR, ".msg-branches-pos").text == "1/2"
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _wait(browser, lambda d: _focused_action(d) == ("branch-prev", second_id))
    # The page's next load (a reload of its own) opens with the focus in the message box again.
    browser.refresh()
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "composer-input")
    assert console_errors(browser) == []


def _shown_ids(browser) -> list[int]:
    return [int(i) for i in browser.execute_script(
        "return [...document.querySelectorAll('#messages [data-id]')].map((m) => m.dataset.id)")]


def test_a_send_from_a_tab_left_behind_by_an_edit_far_up_shows_the_path_it_follows(asgi_server, browser):
    """Another tab edited a message far above the last pages: this page's next message went after the
    edited version's reply (as the model saw it), and the page put that exchange in above it, under
    eighty messages of the branch the edit had left (read only from the last twenty back)."""
    _sign_up(browser, asgi_server.url, "edited-far-up")
    user = get_user_model().objects.get(username="edited-far-up")
    conversation = Conversation.objects.create(owner=user, title="A long chat", offline=True)
    seeded = seed_messages(conversation, 300)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    _wait(browser, lambda d: d.find_elements(By.ID, f"m-{seeded[-1]}"))
    edited = post_stream(user, f"/api/messages/{seeded[150]}/edit/", {"content": "Edited in the other tab"})
    assert edited.status == 200

    browser.find_element(By.ID, "composer-input").send_keys("And from this tab?", Keys.ENTER)

    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status")
          == "complete" and "is-streaming" not in d.find_element(By.ID, "app").get_attribute("class"))
    path = list(Message.objects.filter(conversation=conversation, superseded=False).order_by("id")
                .values_list("id", flat=True))
    shown = _shown_ids(browser)
    assert shown == path[-len(shown):] and seeded[149] in shown
    # The messages before come in order with "Load earlier messages", as on a page opened now.
    _click(browser, browser.find_element(By.CSS_SELECTOR, '[data-action="load-earlier"]'))
    _wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, '[data-action="load-earlier"]'))
    assert _shown_ids(browser) == path
    assert console_errors(browser) == []


def _two_questions_one_edited_elsewhere(browser, url: str, username: str, *, edited: int):
    """Two questions asked in the browser, then the `edited`-th (0 or 1) edited to "Edited elsewhere" as
    from another tab, the page not told: (the user, the first question's id, the second's)."""
    _sign_up(browser, url, username)
    _send(browser, "First question")
    _send(browser, "Second question")
    ids = [m.get_attribute("data-id") for m in _user_messages(browser)]
    user = get_user_model().objects.get(username=username)
    assert post_stream(user, f"/api/messages/{ids[edited]}/edit/", {"content": "Edited elsewhere"}).status == 200
    return user, ids[0], ids[1]


def _edit_submitted(browser, message_id: str, text: str) -> None:
    """Edit on the message, its text replaced by `text`, and Save & submit (Enter)."""
    _click(browser, _message(browser, message_id).find_element(By.CSS_SELECTOR, '[data-action="edit-message"]'))
    editor = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    editor.clear()
    editor.send_keys(text)
    editor.send_keys(Keys.ENTER)


def test_an_edit_refused_as_another_tab_edited_that_message_keeps_the_new_text(asgi_server, browser):
    """Another tab edited the message meanwhile: Save & submit was refused, the page caught up with the
    path and took the old version away, and with it the editor, the rewritten text and why it failed.
    The editor opens again on the version now in its place, holding the text."""
    user, _, second_id = _two_questions_one_edited_elsewhere(browser, asgi_server.url, "edit-edited-elsewhere",
                                                             edited=1)
    _edit_submitted(browser, second_id, "A long, carefully rewritten question")

    shown = Message.objects.get(conversation__owner=user, role="user", superseded=False, content="Edited elsewhere")
    _wait(browser, lambda d: not d.find_elements(By.ID, f"m-{second_id}")
          and _message(d, shown.pk).find_elements(By.CSS_SELECTOR, ".msg-edit .inline-error"))
    editor = _message(browser, shown.pk).find_element(By.CSS_SELECTOR, ".msg-edit-input")
    assert editor.get_attribute("value") == "A long, carefully rewritten question"
    assert "another tab" in _message(browser, shown.pk).find_element(By.CSS_SELECTOR, ".inline-error").text
    assert browser.switch_to.active_element == editor
    # The refusal's own answer (400) is the page's only failed request.
    assert [e for e in console_errors(browser) if "/edit/ - Failed to load resource" not in e["message"]] == []


def test_an_edit_refused_as_another_tab_edited_a_message_above_gives_the_text_to_the_message_box(
        asgi_server, browser):
    """No version stands in its place (the other tab edited the question before it): the text goes to
    the message box, and the page says so."""
    _, _, second_id = _two_questions_one_edited_elsewhere(browser, asgi_server.url, "edit-above-elsewhere", edited=0)
    _edit_submitted(browser, second_id, "A long, carefully rewritten question")

    box = browser.find_element(By.ID, "composer-input")
    _wait(browser, lambda d: box.get_attribute("value") == "A long, carefully rewritten question")
    assert not browser.find_elements(By.ID, f"m-{second_id}")
    assert "message box" in browser.find_element(By.CSS_SELECTOR, ".toast").text


def test_a_version_switch_refused_on_a_page_left_behind_shows_the_path_it_was_refused_on(asgi_server, browser):
    """Another tab edited the question above: "previous version" on one below was refused as not on the branch
    shown, "switch the branch above it first", while the page went on showing it on that branch and no
    other version above it to switch."""
    _sign_up(browser, asgi_server.url, "switch-left-behind")
    _send(browser, "First question")
    _send(browser, "Second question")
    first_id, second_id = (m.get_attribute("data-id") for m in _user_messages(browser))
    user = get_user_model().objects.get(username="switch-left-behind")
    edited = post_stream(user, f"/api/messages/{second_id}/edit/", {"content": "Second, edited"})
    browser.refresh()
    version = edited.named("accepted")[0]["user_message"]["id"]
    _wait(browser, lambda d: _message(d, version).find_elements(By.CSS_SELECTOR, ".msg-branches"))
    assert post_stream(user, f"/api/messages/{first_id}/edit/", {"content": "First, edited"}).status == 200

    _click(browser, _message(browser, version).find_element(By.CSS_SELECTOR, '[data-action="branch-prev"]'))

    conversation = Conversation.objects.get(owner=user)
    path = list(Message.objects.filter(conversation=conversation, superseded=False).order_by("id")
                .values_list("id", flat=True))
    _wait(browser, lambda d: _shown_ids(d) == path)
    assert "switch the branch above" in browser.find_element(By.CSS_SELECTOR, ".toast").text
    assert [e for e in console_errors(browser) if "/branch/ - Failed to load resource" not in e["message"]] == []


def test_a_link_to_a_message_of_another_version_says_where_it_went(asgi_server, browser):
    """A search hit, or a link, to a message an edit has since taken off the path (another tab's search
    list, a bookmark): the page read every earlier page looking for it, then showed the chat's end with
    nothing said."""
    _sign_up(browser, asgi_server.url, "link-elsewhere")
    _send(browser, "First question")
    _send(browser, "Second question")
    second_id = _user_messages(browser)[1].get_attribute("data-id")
    user = get_user_model().objects.get(username="link-elsewhere")
    assert post_stream(user, f"/api/messages/{second_id}/edit/", {"content": "Second, edited"}).status == 200
    conversation = Conversation.objects.get(owner=user)

    browser.get(f"{asgi_server.url}/c/{conversation.pk}/?q=second#m-{second_id}")  # as a search hit links

    _wait(browser, lambda d: any("another version" in t.text for t in d.find_elements(By.CSS_SELECTOR, ".toast")))
    assert console_errors(browser) == []


def test_an_edit_far_up_refused_as_another_tab_edited_that_message_keeps_the_new_text_there(asgi_server, browser):
    """The catch-up after the refusal reads the chat's newest page afresh when the change is that far up:
    the message before the edited one was drawn anew, and the text went to the message box although
    the version now in its place was shown."""
    _sign_up(browser, asgi_server.url, "edit-far-up-elsewhere")
    user = get_user_model().objects.get(username="edit-far-up-elsewhere")
    conversation = Conversation.objects.create(owner=user, title="A long chat", offline=True)
    seeded = seed_messages(conversation, 300)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    _click(browser, _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, '[data-action="load-earlier"]')))
    _click(browser, _wait(browser, lambda d: _message(d, seeded[150]).find_element(
        By.CSS_SELECTOR, '[data-action="edit-message"]')))
    editor = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    edited = post_stream(user, f"/api/messages/{seeded[150]}/edit/", {"content": "Edited in the other tab"})
    version = edited.named("accepted")[0]["user_message"]["id"]
    editor.send_keys(Keys.CONTROL, "a")
    editor.send_keys("A long, carefully rewritten question", Keys.ENTER)

    _wait(browser, lambda d: _message(d, version).find_elements(By.CSS_SELECTOR, ".msg-edit .inline-error"))
    editor = _message(browser, version).find_element(By.CSS_SELECTOR, ".msg-edit-input")
    assert editor.get_attribute("value") == "A long, carefully rewritten question"
    assert browser.find_element(By.ID, "composer-input").get_attribute("value") == ""


def _long_chat_open(browser, url: str, username: str, *, seed=lambda c: seed_messages(c, 300)):
    """A new user's chat of `seed`'s messages (300) open in the browser, its last reply shown:
    (the user, the chat, the seeded ids, that reply)."""
    _sign_up(browser, url, username)
    user = get_user_model().objects.get(username=username)
    conversation = Conversation.objects.create(owner=user, title="A long chat", offline=True)
    seeded = seed(conversation)
    browser.get(f"{url}/c/{conversation.pk}/")
    return user, conversation, seeded, _wait(browser, lambda d: _message(d, seeded[-1]))


def test_a_regenerate_refused_on_a_tab_left_behind_by_an_edit_far_up_shows_the_path_with_its_controls(
        asgi_server, browser):
    """The page caught up with the path, but its newest reply came without Regenerate (drawn as a page of
    earlier messages is), so the reply the refusal pointed to could not be regenerated from there."""
    user, conversation, seeded, old_reply = _long_chat_open(browser, asgi_server.url, "regenerate-far-up")
    assert post_stream(user, f"/api/messages/{seeded[150]}/edit/", {"content": "Edited in the other tab"}).status == 200

    _click(browser, old_reply.find_element(By.CSS_SELECTOR, '[data-action="regenerate"]'))

    path = list(Message.objects.filter(conversation=conversation, superseded=False).order_by("id")
                .values_list("id", flat=True))
    _wait(browser, lambda d: _shown_ids(d) == path[-len(_shown_ids(d)):] and seeded[149] in _shown_ids(d))
    newest = _message(browser, path[-1])
    assert newest.find_element(By.CSS_SELECTOR, '[data-action="regenerate"]').is_displayed()
    assert [e for e in console_errors(browser) if "/regenerate/ - Failed to load resource" not in e["message"]] == []


def test_a_version_switch_in_a_chat_deleted_elsewhere_says_the_chat_is_gone(asgi_server, browser):
    """It said "This message no longer exists: it was deleted", of a message nobody can delete."""
    _sign_up(browser, asgi_server.url, "switch-deleted")
    first = _send(browser, "Tell me about apples.")
    _click(browser, first.find_element(By.CSS_SELECTOR, '[data-action="regenerate"]'))
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant .msg-branches")
          and "is-streaming" not in d.find_element(By.ID, "app").get_attribute("class"))
    Conversation.objects.filter(owner__username="switch-deleted").delete()  # in another tab

    _click(browser, browser.find_element(By.CSS_SELECTOR, '[data-action="branch-prev"]'))

    _wait(browser, lambda d: any("This chat no longer exists" in t.text
                                 for t in d.find_elements(By.CSS_SELECTOR, ".toast")))
    assert [e for e in console_errors(browser) if "/branch/ - Failed to load resource" not in e["message"]] == []


def test_a_tab_left_behind_catching_up_with_an_edit_far_up_stays_at_the_chats_end(asgi_server, browser):
    """The newest page drawn in place of the old one is far taller: the view kept its distance from the
    top, and showed messages from the middle of it rather than the newest, where the user was."""
    user, _, seeded, old_reply = _long_chat_open(
        browser, asgi_server.url, "catch-up-at-end",
        seed=lambda c: seed_messages(c, 150, words=150) + seed_messages(c, 150, start=150))
    assert post_stream(user, f"/api/messages/{seeded[148]}/edit/", {"content": "Edited in the other tab"}).status == 200

    _click(browser, old_reply.find_element(By.CSS_SELECTOR, '[data-action="regenerate"]'))

    _wait(browser, lambda d: seeded[147] in _shown_ids(d))
    _wait(browser, lambda d: d.execute_script(
        "const t = document.getElementById('timeline'); return t.scrollHeight - t.scrollTop - t.clientHeight < 80"))


def test_a_tab_left_behind_catching_up_with_another_tabs_edit_counts_the_path_it_shows(asgi_server, browser):
    """The page showed the path the other tab's edit left, and its gauge went on counting the 300
    messages the model is no longer sent, until the next reply."""
    user, conversation, seeded, old_reply = _long_chat_open(browser, asgi_server.url, "catch-up-gauge")
    gauge = browser.find_element(By.ID, "gauge-text")
    stale = _wait(browser, lambda d: gauge.text if gauge.text not in ("", "…") else None)
    assert post_stream(user, f"/api/messages/{seeded[10]}/edit/", {"content": "Edited in the other tab"}).status == 200
    one = browser.current_window_handle
    # The chat opened now, in a window of its own, as on another device: a tab of this window would hide
    # the first, which, shown again, reads the chat anew (tab_sync.js) and is no longer left behind.
    browser.switch_to.new_window("window")
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    fresh = _wait(browser, lambda d: d.find_element(By.ID, "gauge-text").text
                  if d.find_element(By.ID, "gauge-text").text not in ("", "…") else None)
    assert fresh != stale
    browser.close()
    browser.switch_to.window(one)

    _click(browser, old_reply.find_element(By.CSS_SELECTOR, '[data-action="regenerate"]'))

    _wait(browser, lambda d: seeded[9] in _shown_ids(d))
    _wait(browser, lambda d: d.find_element(By.ID, "gauge-text").text == fresh)


def test_branch_in_new_chat_opens_a_chat_holding_the_path_to_the_message(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "browser-fork")
    _send(browser, "Tell me about apples.")
    _send(browser, "And about pears?")
    original = Conversation.objects.get(owner__username="browser-fork")
    first_reply = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[0]
    reply_id = first_reply.get_attribute("data-id")

    # From the menu of a reply the page drew itself as it streamed (dom.js), not one the server rendered.
    _click(browser, first_reply.find_element(By.CSS_SELECTOR, '[data-action="message-menu"]'))
    _click(browser, _message(browser, reply_id).find_element(By.CSS_SELECTOR, '[data-action="fork-chat"]'))
    _wait(browser, lambda d: f"/c/{original.pk}/" not in d.current_url and "/c/" in d.current_url)
    fork = Conversation.objects.exclude(pk=original.pk).get(owner__username="browser-fork")
    _wait(browser, lambda d: len(_texts(d)) == 2)
    assert _texts(browser)[0] == "Tell me about apples."
    assert browser.current_url.endswith(f"/c/{fork.pk}/") and fork.title.endswith(" (branch)")

    # The original is as it was; from its server-rendered page, the menu item is there too.
    browser.get(f"{asgi_server.url}/c/{original.pk}/")
    _wait(browser, lambda d: len(_texts(d)) == 4)
    item = _message(browser, reply_id).find_element(By.CSS_SELECTOR, '[data-action="fork-chat"]')
    assert item.get_attribute("role") == "menuitem" and "Branch in new chat" in item.get_attribute("textContent")
    assert console_errors(browser) == []


def test_a_pin_on_a_version_another_tab_replaced_is_refused_and_the_page_catches_up(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "tab-left-behind")
    _send(browser, "Tell me about apples.")
    user = get_user_model().objects.get(username="tab-left-behind")
    first = Message.objects.get(conversation__owner=user, role="user")
    # Another tab edits the question: this page still shows the old version and its reply.
    post_stream(user, f"/api/messages/{first.pk}/edit/", {"content": "Tell me about quinces."})

    _click(browser, _message(browser, first.pk).find_element(By.CSS_SELECTOR, '[data-action="message-menu"]'))
    _click(browser, _message(browser, first.pk).find_element(By.CSS_SELECTOR, '[data-action="toggle-pin"]'))
    toast = _wait(browser, lambda d: [t for t in d.find_elements(By.CSS_SELECTOR, "#toasts .toast")
                                      if "switch to it first" in t.text])[0]
    assert "no longer shows" in toast.text
    _wait(browser, lambda d: "Tell me about quinces." in _texts(d) and "Tell me about apples." not in _texts(d))
    assert not Message.objects.get(pk=first.pk).pinned


def test_an_edit_of_a_pinned_message_shows_the_pin_on_the_new_version(asgi_server, browser):
    """The new version keeps the pin (the server sends it as pinned): the bubble the edit streams into
    says so at once, with Unpin in its menu, as it does after a reload."""
    _sign_up(browser, asgi_server.url, "browser-pinned-edit")
    _send(browser, "The spec: PostgreSQL 16 on port 5433.")
    first_id = _user_messages(browser)[0].get_attribute("data-id")
    _click(browser, _message(browser, first_id).find_element(By.CSS_SELECTOR, '[data-action="message-menu"]'))
    _click(browser, _message(browser, first_id).find_element(By.CSS_SELECTOR, '[data-action="toggle-pin"]'))
    _wait(browser, lambda d: _message(d, first_id).get_attribute("data-pinned") == "1")

    _click(browser, _message(browser, first_id).find_element(By.CSS_SELECTOR, '[data-action="edit-message"]'))
    editor = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    editor.clear()
    editor.send_keys("The spec: PostgreSQL 17 on port 5434.")
    browser.find_element(By.CSS_SELECTOR, ".msg-edit button[type=submit]").click()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status")
          == "complete" and _user_messages(d)[0].get_attribute("data-id") != first_id)

    def shows_the_pin(d) -> bool:
        edited = _user_messages(d)[0]
        return (edited.get_attribute("data-pinned") == "1"
                and edited.find_element(By.CSS_SELECTOR, ".badge--pin").is_displayed()
                and edited.find_element(By.CSS_SELECTOR, '[data-action="toggle-pin"] span')
                .get_attribute("textContent") == "Unpin")

    _wait(browser, shows_the_pin)
    edited_id = int(_user_messages(browser)[0].get_attribute("data-id"))
    assert Message.objects.get(pk=edited_id).pinned
    browser.refresh()
    _wait(browser, shows_the_pin)
    assert not console_errors(browser)


def test_an_edit_below_a_summary_of_messages_not_shown_keeps_its_marker(asgi_server, browser):
    """A long chat whose summary covers messages older than the page shows: its marker stands where it
    was written, after the last exchange. Editing the last message leaves that summary on the path (it
    covers none of what the edit takes off), so the page keeps showing it, as a reload does; a later one
    covering the edited message goes with it, and the first is the one in use again."""
    _sign_up(browser, asgi_server.url, "edit-below-summary")
    user = get_user_model().objects.get(username="edit-below-summary")
    conversation = Conversation.objects.create(owner=user, title="A long summarized chat", offline=True)
    seeded = seed_messages(conversation, 200)
    summary = Message.objects.create(
        conversation=conversation, role="system", kind="summary",
        content="[Conversation summary — covers messages 1-10]\n\nThe first part.",
        covers_from_id=seeded[0], covers_through_id=seeded[9], covered_message_count=10,
    )
    later = Message.objects.create(
        conversation=conversation, role="system", kind="summary",
        content="[Conversation summary — covers messages 1-200]\n\nAll of it.",
        covers_from_id=seeded[0], covers_through_id=seeded[-1], covered_message_count=200,
    )
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    _wait(browser, lambda d: d.find_elements(By.ID, f"m-{summary.pk}") and d.find_elements(By.ID, f"m-{later.pk}"))

    _edit_submitted(browser, str(seeded[-2]), "The last question, asked again")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status")
          == "complete" and not d.find_elements(By.ID, f"m-{seeded[-2]}"))

    assert not Message.objects.get(pk=summary.pk).superseded  # still the path's summary
    assert Message.objects.get(pk=later.pk).superseded and not browser.find_elements(By.ID, f"m-{later.pk}")
    marker = browser.find_element(By.ID, f"m-{summary.pk}")
    assert marker.find_element(By.CSS_SELECTOR, ".summary-marker-title").text == "Summary takes over here"
    assert console_errors(browser) == []


def test_an_edit_of_the_oldest_message_shown_keeps_the_path_above_it_unread(asgi_server, browser):
    """The message edited is the oldest the page shows, the one it follows not read yet ("Load earlier
    messages"): the page took that for a chat changed elsewhere, said so, and read the chat from its
    start, putting its first hundred messages right above the new version, the hundred between unshown."""
    _sign_up(browser, asgi_server.url, "edit-oldest-shown")
    conversation = Conversation.objects.create(owner=get_user_model().objects.get(username="edit-oldest-shown"),
                                               title="Read from its end", offline=True)
    seed_messages(conversation, 250)  # the page shows the newest 100, a question first
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    oldest = _wait(browser, _user_messages)[0].get_attribute("data-id")
    assert int(oldest) == _shown_ids(browser)[0]
    assert browser.find_elements(By.CSS_SELECTOR, '[data-action="load-earlier"]')

    _edit_submitted(browser, oldest, "The oldest question shown, asked again")

    def path() -> list[int]:
        return list(Message.objects.filter(conversation=conversation, superseded=False).order_by("id")
                    .values_list("id", flat=True))

    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status")
          == "complete" and _shown_ids(d) == path()[-2:])
    assert not [t for t in browser.find_elements(By.CSS_SELECTOR, "#toasts .toast") if "another tab" in t.text]
    # What it follows comes with "Load earlier messages", in order, as on a page opened now.
    _click(browser, browser.find_element(By.CSS_SELECTOR, '[data-action="load-earlier"]'))
    _wait(browser, lambda d: _shown_ids(d) == path()[-102:])
    assert console_errors(browser) == []
