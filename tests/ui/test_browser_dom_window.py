"""A long chat read far up and back in headless Chromium keeps a bounded run of rendered messages
(static/js/chat/window.js): the newest ones go as older pages come in, and come back, page by page,
with none missing or twice; a send, the jump button and a link to a message deep in the history bring
the run they need. Before, every page read stayed in the tab: 12,000 messages up, hundreds of
thousands of nodes."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.account_services import account_delete
from chatapp.chat.models import Conversation
from tests.support.browser import console_errors
from tests.support.chat import seed_messages
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BOUND = 300  # window.js MAX_RENDERED

SHOWN = "return [...document.querySelectorAll('#messages > .msg[data-id]')].map((m) => +m.dataset.id)"


def _chat(browser, base, name, count):
    _sign_up(browser, base, name)
    user = get_user_model().objects.get(username=name)
    conversation = Conversation.objects.create(owner=user, title=name, offline=True)
    ids = seed_messages(conversation, count, words=30)
    browser.get(f"{base}/c/{conversation.pk}/")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-action="load-earlier"]'))
    return conversation, ids


def _press(browser, action):
    """Press "Load earlier/newer messages" and wait for the page it reads; the ids shown then."""
    before = browser.execute_script(SHOWN)
    button = browser.find_element(By.CSS_SELECTOR, f'[data-action="{action}"]')
    browser.execute_script("arguments[0].click()", button)
    _wait(
        browser,
        lambda d: (
            d.execute_script(SHOWN) != before
            and not d.find_elements(By.CSS_SELECTOR, f'[data-action="{action}"][disabled]')
        ),
    )
    return browser.execute_script(SHOWN)


def _run_of(ids, shown):
    """Whether `shown` is a run of the path's `ids`, in order, each once: no gap, no repeat."""
    start = ids.index(shown[0])
    return shown == ids[start : start + len(shown)]


def _read_up(browser, ids, pages):
    for _ in range(pages):
        shown = _press(browser, "load-earlier")
        assert len(shown) <= BOUND
        assert _run_of(ids, shown)
        # Nor do the nodes between them pile up (the white space around each message read in).
        assert browser.execute_script("return document.getElementById('messages').childNodes.length") <= 2 * BOUND + 10
    return shown


def _wait_reply_after(browser, newest: int) -> None:
    """Until the page ends with a complete reply newer than message `newest`."""
    _wait(
        browser,
        lambda d: d.execute_script(
            "const m = [...document.querySelectorAll('#messages > .msg')].pop();"
            "return m.dataset.role === 'assistant' && +m.dataset.id > arguments[0] && m.dataset.status === 'complete'",
            newest,
        ),
    )


def test_reading_far_up_keeps_the_run_bounded_and_reading_down_gets_back_to_the_end(asgi_server, browser):
    _, ids = _chat(browser, asgi_server.url, "dom-reader", 2400)
    shown = _read_up(browser, ids, 12)  # 1,300 messages up
    assert shown[0] == ids[-1300] and len(shown) == BOUND
    newer = browser.find_element(By.CSS_SELECTOR, '[data-action="load-newer"]')
    assert newer.get_attribute("data-after") == str(shown[-1])
    assert browser.find_element(By.ID, "jump-btn").is_displayed()  # the chat's end is not shown

    # Reading down: each page comes in below, the oldest go above, the message read stays where it is.
    while browser.find_elements(By.CSS_SELECTOR, '[data-action="load-newer"]'):
        browser.execute_script("document.getElementById('timeline').scrollTo({top: 1e9, behavior: 'instant'})")
        read = browser.execute_script(
            "const t = document.getElementById('timeline').getBoundingClientRect().top;"
            "const m = [...document.querySelectorAll('#messages > .msg[data-id]')]"
            "  .find((x) => x.getBoundingClientRect().bottom > t);"
            "return [m.id, m.getBoundingClientRect().top];"
        )
        shown = _press(browser, "load-newer")
        assert len(shown) <= BOUND
        assert _run_of(ids, shown)
        top = browser.execute_script(
            "return document.getElementById(arguments[0]).getBoundingClientRect().top", read[0]
        )
        assert abs(top - read[1]) < 2
    assert shown[-1] == ids[-1] and len(shown) == BOUND
    assert browser.find_element(By.CSS_SELECTOR, '[data-action="load-earlier"]').get_attribute("data-before") == str(
        shown[0]
    )
    # The newest page read is the chat's end, as the page first drawn: Regenerate on its last reply.
    assert (
        browser.find_element(By.ID, f"m-{ids[-1]}")
        .find_element(By.CSS_SELECTOR, '[data-action="regenerate"]')
        .is_displayed()
    )
    assert console_errors(browser) == []


def test_a_send_from_far_up_shows_the_reply_at_the_end(asgi_server, browser):
    _, ids = _chat(browser, asgi_server.url, "dom-sender", 800)
    _read_up(browser, ids, 5)
    assert ids[-1] not in browser.execute_script(SHOWN)

    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("Back at the end?", Keys.ENTER)
    _wait_reply_after(browser, ids[-1])
    shown = browser.execute_script(SHOWN)
    assert shown[:-2] == ids[-len(shown) + 2 :]  # the chat's newest page, then the send and its reply
    last_user = browser.find_elements(By.CSS_SELECTOR, "#messages > .msg--user")[-1]
    assert last_user.find_element(By.CSS_SELECTOR, ".msg-content").text == "Back at the end?"
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-action="load-newer"]')
    _wait(
        browser,
        lambda d: d.execute_script(
            "const t = document.getElementById('timeline'); return t.scrollHeight - t.scrollTop - t.clientHeight < 160"
        ),
    )
    assert console_errors(browser) == []


def test_the_jump_button_from_far_up_shows_the_chat_end(asgi_server, browser):
    _, ids = _chat(browser, asgi_server.url, "dom-jumper", 800)
    _read_up(browser, ids, 5)
    browser.find_element(By.ID, "jump-btn").click()
    _wait(browser, lambda d: d.execute_script(SHOWN)[-1] == ids[-1])
    assert browser.execute_script(SHOWN) == ids[-100:]
    _wait(browser, lambda d: not d.find_element(By.ID, "jump-btn").is_displayed())
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-action="load-newer"]')
    assert console_errors(browser) == []


def test_a_link_to_a_message_deep_in_a_long_chat_shows_the_run_around_it(asgi_server, browser):
    conversation, ids = _chat(browser, asgi_server.url, "dom-linker", 3000)
    target = ids[40]
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/#m-{target}")
    _wait(browser, lambda d: d.find_elements(By.ID, f"m-{target}") and d.execute_script("return location.hash") == "")
    assert browser.switch_to.active_element == browser.find_element(By.ID, f"m-{target}")
    shown = browser.execute_script(SHOWN)
    assert _run_of(ids, shown) and target in shown and len(shown) <= BOUND
    assert shown[0] == ids[0] and not browser.find_elements(By.CSS_SELECTOR, '[data-action="load-earlier"]')
    # The chat's end is a press away, read back in pages with the run staying bounded.
    assert browser.find_element(By.ID, "jump-btn").is_displayed()
    shown = _press(browser, "load-newer")
    assert _run_of(ids, shown) and len(shown) <= BOUND
    assert console_errors(browser) == []


def test_an_edit_far_up_takes_what_followed_it_off_the_page(asgi_server, browser):
    # What followed the edited message is another version now, the part dropped below included: no
    # "Load newer messages" reads it back, and the edit's reply is the chat's end.
    _, ids = _chat(browser, asgi_server.url, "dom-editor", 800)
    shown = _read_up(browser, ids, 5)
    edited = shown[100] if shown[100] in ids[::2] else shown[101]  # a message of yours (ids[::2]: user)
    article = browser.find_element(By.ID, f"m-{edited}")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", article)
    browser.execute_script(
        "arguments[0].click()", article.find_element(By.CSS_SELECTOR, '[data-action="edit-message"]')
    )
    area = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f"#m-{edited} .msg-edit-input"))
    area.clear()
    area.send_keys("Edited far up", Keys.ENTER)
    _wait_reply_after(browser, ids[-1])
    now = browser.execute_script(SHOWN)
    assert now[:-2] == shown[: shown.index(edited)] and now[-2] > ids[-1]
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-action="load-newer"]')
    assert console_errors(browser) == []


def test_load_newer_pressed_from_the_keyboard_keeps_the_focus(asgi_server, browser):
    # Disabled while it reads, the button lost the focus to the page (Chromium's focus fixup) and did
    # not get it back: a keyboard or screen-reader user was thrown to the top of the page at each press.
    _, ids = _chat(browser, asgi_server.url, "dom-keys", 800)
    _read_up(browser, ids, 5)
    newer = browser.find_element(By.CSS_SELECTOR, '[data-action="load-newer"]')
    browser.execute_script("arguments[0].focus({preventScroll: true})", newer)
    before = browser.execute_script(SHOWN)
    newer.send_keys(Keys.ENTER)
    _wait(
        browser,
        lambda d: (
            d.execute_script(SHOWN) != before
            and not d.find_elements(By.CSS_SELECTOR, '[data-action="load-newer"][disabled]')
        ),
    )
    assert browser.find_elements(By.CSS_SELECTOR, '[data-action="load-newer"]')  # more pages below still
    assert browser.switch_to.active_element == newer  # was BODY
    assert console_errors(browser) == []


def test_a_page_whose_account_was_deleted_meanwhile_draws_no_sign_in_page_into_itself(asgi_server, browser):
    # The account deleted in another tab (or signed out there), the page's fragments were answered by a
    # redirect to the sign-in page, which fetch follows: the whole sign-in page was drawn into the chats
    # list (a search, a redraw heard) and into the timeline (Load earlier messages), password field and all.
    conversation, _ = _chat(browser, asgi_server.url, "dom-deleted", 250)
    account_delete(user=conversation.owner)

    browser.find_element(By.ID, "chat-search").send_keys("anything")
    _wait(browser, lambda d: "signed out" in d.find_element(By.ID, "toasts").text)
    browser.execute_script(
        "arguments[0].click()", browser.find_element(By.CSS_SELECTOR, '[data-action="load-earlier"]')
    )
    _wait(browser, lambda d: "Could not load earlier messages" in d.find_element(By.ID, "toasts").text)
    assert not browser.find_elements(By.CSS_SELECTOR, "#conv-nav input[type=password], #messages input[type=password]")
    assert browser.find_element(By.CSS_SELECTOR, '[data-action="load-earlier"]').is_enabled()
