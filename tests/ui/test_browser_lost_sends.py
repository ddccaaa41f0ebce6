"""What the page does when a send, an edit or a tab falls behind: nothing typed is lost, and the page
shows what the model was given."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat import chat_turn
from chatapp.chat.models import Conversation, Message
from tests.support.browser import console_errors
from tests.ui.test_browser import _send, _sign_up, _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _user_texts(username: str) -> list[str]:
    user = get_user_model().objects.get(username=username)
    return list(Message.objects.filter(conversation__owner=user, role="user", superseded=False)
                .order_by("id").values_list("content", flat=True))


def test_a_send_that_never_reached_the_server_gives_the_text_back(asgi_server, browser, fake_openai):
    # It showed a Retry that retried the previous stored question, and the new text was gone.
    _sign_up_with_model(browser, asgi_server.url, "net-drop", fake_url=fake_openai.base_url,
                        model="fail-500", name="Failing")
    browser.get(asgi_server.url + "/c/new/")
    assert _send(browser, "First question").get_attribute("data-status") == "error"
    browser.set_network_conditions(offline=True, latency=0, download_throughput=-1, upload_throughput=-1)
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("Second question, typed with care")
    box.send_keys(Keys.ENTER)

    error = _wait(browser, lambda d: d.find_elements(By.ID, "composer-error"))[0]
    assert "Could not reach the server" in error.text
    assert box.get_attribute("value") == "Second question, typed with care"
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg--user")) == 1
    browser.delete_network_conditions()
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")) == 2)
    assert _user_texts("net-drop") == ["First question", "Second question, typed with care"]


def test_a_refused_edit_keeps_the_editor_open_on_the_new_text(asgi_server, browser, settings):
    settings.SEND_RATE_LIMIT_PER_MINUTE = 1
    _sign_up(browser, asgi_server.url, "edit-refused")
    assert _send(browser, "first").get_attribute("data-status") == "complete"
    mine = browser.find_element(By.CSS_SELECTOR, ".msg--user[data-id]")
    browser.execute_script("arguments[0].click()", mine.find_element(By.CSS_SELECTOR, '[data-action="edit-message"]'))
    area = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    area.send_keys(Keys.CONTROL, "a")
    area.send_keys("A long, carefully rewritten question")
    area.send_keys(Keys.ENTER)

    error = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg-edit .inline-error"))[0]
    assert "quickly" in error.text or "wait" in error.text.lower()
    editor = browser.find_element(By.CSS_SELECTOR, ".msg-edit-input")
    assert editor.get_attribute("value") == "A long, carefully rewritten question"
    assert browser.switch_to.active_element == editor
    assert _user_texts("edit-refused") == ["first"]


def test_a_send_from_a_tab_left_behind_shows_the_turns_it_follows(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "two-tabs")
    _send(browser, "From tab one: first")
    url = browser.current_url
    one = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(url)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant[data-id]"))
    _send(browser, "From tab two: second")
    browser.close()
    browser.switch_to.window(one)

    _send(browser, "From tab one: third")

    path = ["From tab one: first", "From tab two: second", "From tab one: third"]
    assert _user_texts("two-tabs") == path
    _wait(browser, lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, ".msg--user .msg-content")] == path)
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")) == 3
    assert console_errors(browser) == []


def test_the_length_check_counts_characters_as_the_server_does(asgi_server, browser, settings):
    settings.MAX_MESSAGE_CHARS = 12
    _sign_up(browser, asgi_server.url, "emoji-limit")
    browser.execute_script("""
        document.getElementById('composer-input').value = '\\u{1F600}'.repeat(10);
        document.getElementById('composer').requestSubmit();
    """)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")
          or d.find_elements(By.ID, "composer-error"))
    assert browser.find_elements(By.ID, "composer-error") == []
    assert _user_texts("emoji-limit") == ["\U0001F600" * 10]


def _chat_in_a_second_tab(browser) -> tuple[str, str]:
    """The chat shown opened in a new tab too, which then has the focus: (the first tab, the new one)."""
    url = browser.current_url
    one = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(url)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant[data-id]"))
    return one, browser.current_window_handle


def _tab_left_behind(browser, fake_openai, asgi_server, username: str) -> str:
    """A chat with one exchange open in two windows, as on two devices; the first sends again, and the
    second, which has the focus when this returns, does not know: the id of the reply streaming. (Two
    tabs of one browser hear each other's turns, tab_sync.js: the first tells nothing here, and the
    second, a window of its own, is never hidden, so never reads the chat again when shown.)"""
    _sign_up_with_model(browser, asgi_server.url, username, fake_url=fake_openai.base_url, model="slow-400",
                        name="Slow")
    browser.find_element(By.ID, "composer-input").send_keys("From tab one: first", Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))
    url, one = browser.current_url, browser.current_window_handle
    browser.switch_to.new_window("window")
    browser.get(url)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant[data-id]"))
    two = browser.current_window_handle
    browser.switch_to.window(one)
    browser.execute_script("BroadcastChannel.prototype.postMessage = () => {};")  # another device's page
    browser.find_element(By.ID, "composer-input").send_keys("From tab one: a long answer", Keys.ENTER)
    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming[data-id]"))[0]
    reply_id = reply.get_attribute("data-id")
    browser.switch_to.window(two)
    return reply_id


def test_a_send_refused_while_another_tab_streams_shows_that_reply_to_stop(asgi_server, browser, fake_openai):
    """The tab left behind was told "A reply is still being written… Wait for it or stop it", and
    showed no such reply, nor anything to stop it with, until it was reloaded."""
    reply_id = _tab_left_behind(browser, fake_openai, asgi_server, "busy-tabs")

    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("From tab two: meanwhile", Keys.ENTER)
    _wait(browser, lambda d: "still being written" in d.find_element(By.ID, "composer-error").text)
    assert box.get_attribute("value") == "From tab two: meanwhile"
    # The reply it is told to wait for or stop is shown, followed, and stopped from here.
    _wait(browser, lambda d: d.find_element(By.ID, f"m-{reply_id}").get_attribute("data-status") == "streaming")
    assert "a long answer" in browser.find_elements(By.CSS_SELECTOR, ".msg--user .msg-content")[-1].text
    # Regenerate is the newest reply's only, as everywhere.
    regenerate = [b for b in browser.find_elements(By.CSS_SELECTOR, '[data-action="regenerate"]') if b.is_displayed()]
    assert [b.find_element(By.XPATH, "ancestor::article").get_attribute("id") for b in regenerate] == [f"m-{reply_id}"]
    _wait(browser, lambda d: d.find_element(By.ID, "stop-btn").is_displayed())
    box.send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: d.find_element(By.ID, f"m-{reply_id}").get_attribute("data-status") == "stopped")
    assert Message.objects.get(pk=int(reply_id)).status == "stopped"
    assert box.get_attribute("value") == "From tab two: meanwhile"


def test_a_regenerate_refused_while_another_tab_streams_shows_that_reply(asgi_server, browser, fake_openai):
    """Refused as "Only the latest exchange can be regenerated", the tab went on showing the reply it
    asked for as the latest, and nothing of the exchange the other tab had started."""
    reply_id = _tab_left_behind(browser, fake_openai, asgi_server, "busy-regenerate")
    old = browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1]
    browser.execute_script("arguments[0].click()", old.find_element(By.CSS_SELECTOR, '[data-action="regenerate"]'))
    _wait(browser, lambda d: any("latest exchange" in t.text for t in d.find_elements(By.CSS_SELECTOR, ".toast")))

    _wait(browser, lambda d: d.find_element(By.ID, f"m-{reply_id}").get_attribute("data-status") == "streaming")
    _wait(browser, lambda d: d.find_element(By.ID, "stop-btn").is_displayed())
    assert old.is_displayed()  # the reply it asked to regenerate is back, as it was
    _wait(browser, lambda d: d.find_element(By.ID, f"m-{reply_id}").get_attribute("data-status") == "complete",
          timeout=60)


def test_a_send_to_a_chat_deleted_elsewhere_says_so_in_plain_words(asgi_server, browser):
    """It said "No Conversation matches the given query." (Django's words for a missing row)."""
    _sign_up(browser, asgi_server.url, "deleted-elsewhere")
    _send(browser, "A chat about to go")
    user = get_user_model().objects.get(username="deleted-elsewhere")
    Conversation.objects.filter(owner=user).delete()  # another tab or device deleted it

    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("Anyone there?", Keys.ENTER)
    error = _wait(browser, lambda d: d.find_element(By.ID, "composer-error"))
    assert error.text == "This chat no longer exists: it was deleted (in another tab or device?)."
    assert box.get_attribute("value") == "Anyone there?"
    regenerate = browser.find_elements(By.CSS_SELECTOR, '[data-action="regenerate"]')[-1]
    browser.execute_script("arguments[0].click()", regenerate)
    _wait(browser, lambda d: any("no longer exists" in t.text for t in d.find_elements(By.CSS_SELECTOR, ".toast")))


def test_renaming_a_chat_deleted_elsewhere_says_so_in_plain_words(asgi_server, browser):
    """Rename said "No Conversation matches the given query." (as Pin said "No Message matches…")."""
    _sign_up(browser, asgi_server.url, "gone-rename")
    _send(browser, "A chat about to go")
    user = get_user_model().objects.get(username="gone-rename")
    Conversation.objects.filter(owner=user).delete()  # another tab or device deleted it

    browser.find_element(By.CSS_SELECTOR, '[data-action="rename-current"]').click()
    field = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".title-input"))
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys("A new name", Keys.ENTER)
    _wait(browser, lambda d: any("no longer exists" in t.text for t in d.find_elements(By.CSS_SELECTOR, ".toast")))
    assert not any("matches the given query" in t.text for t in browser.find_elements(By.CSS_SELECTOR, ".toast"))


# The first POST of a message reaches the server, which stores it, but its answer is lost on the way back
# (a connection dropped after the request went out): fetch fails as for a send that never left.
LOSE_THE_FIRST_ANSWER = """
const real = window.fetch;
let lost = false;
window.fetch = async (url, options) => {
  const response = await real(url, options);
  if (!lost && /\\/messages\\/$/.test(String(url)) && options && options.method === "POST") {
    lost = true;
    response.body.cancel();
    throw new TypeError("Failed to fetch");
  }
  return response;
};
"""


def test_a_send_whose_answer_was_lost_sent_again_is_stored_once(asgi_server, browser, fake_openai):
    # "Could not reach the server" gave the text back, and Enter sent it again under a new idempotency
    # key: stored twice, the question asked twice, and the model answered it twice.
    _sign_up_with_model(browser, asgi_server.url, "answer-lost", fake_url=fake_openai.base_url,
                        model="fake-echo", name="Echo")
    assert _send(browser, "First question").get_attribute("data-status") == "complete"
    browser.execute_script(LOSE_THE_FIRST_ANSWER)
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("Second question, typed with care", Keys.ENTER)
    error = _wait(browser, lambda d: d.find_elements(By.ID, "composer-error"))[0]
    assert "Could not reach the server" in error.text
    assert box.get_attribute("value") == "Second question, typed with care"
    # The server had it, and answers it without the page (the reply goes on when its client leaves).
    _wait(browser, lambda d: Message.objects.filter(
        role="assistant", status="complete", conversation__owner__username="answer-lost").count() == 2)

    box.send_keys(Keys.ENTER)  # sent again, as the error invites

    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")) == 2)
    assert _user_texts("answer-lost") == ["First question", "Second question, typed with care"]
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]')) == 2)
    assert box.get_attribute("value") == ""  # sent: not given back to be sent a third time


def _packing_held(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """The server's packing of a turn's context waits until the test lets it go: (set once it waits, set
    by the test to let it go)."""
    packing, packed = threading.Event(), threading.Event()
    real_pack = chat_turn.turn_pack

    def held_pack(*, start):
        packing.set()
        packed.wait(30)
        return real_pack(start=start)

    monkeypatch.setattr(chat_turn, "turn_pack", held_pack)
    return packing, packed


def _echo_chat_packing_held(browser, asgi_server, fake_openai, monkeypatch, username: str):
    """Signed up as `username` with the instant echo model, the packing held (_packing_held)."""
    held = _packing_held(monkeypatch)
    _sign_up_with_model(browser, asgi_server.url, username, fake_url=fake_openai.base_url,
                        model="fake-echo", name="Echo")
    return held


# The page's own give-up timers (Stop's, after 4 s without the server's answer) come at once: no test waits
# them out.
TIMERS_AT_ONCE = """
const real = window.setTimeout;
window.setTimeout = (fn, ms, ...rest) => real(fn, ms >= 4000 ? 0 : ms, ...rest);
"""


def test_stop_pressed_while_the_context_is_packed_stops_the_reply(asgi_server, browser, fake_openai, monkeypatch):
    # Stop pressed before the reply had an id waited 4 s for it, then dropped the connection: the server,
    # which answers a send whose client left, wrote the whole reply (and billed it) while the page said
    # "Stopped".
    packing, packed = _packing_held(monkeypatch)
    _sign_up_with_model(browser, asgi_server.url, "stop-early", fake_url=fake_openai.base_url,
                        model="slow-300", name="Slow")
    browser.execute_script(TIMERS_AT_ONCE)
    browser.find_element(By.ID, "composer-input").send_keys("Tell me a long story", Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]"))  # stored: `accepted`
    assert packing.wait(30)
    stop = _wait(browser, lambda d: d.find_element(By.ID, "stop-btn"))
    _wait(browser, lambda d: stop.is_displayed())
    stop.click()
    _wait(browser, lambda d: stop.is_enabled())  # the page has done what Stop does before `start`
    packed.set()

    def ended(_):
        return Message.objects.filter(conversation__owner__username="stop-early", role="assistant").exclude(
            status="streaming").first()

    reply = _wait(browser, ended)
    assert reply.status == "stopped"
    _wait(browser, lambda d: d.find_element(By.ID, f"m-{reply.pk}").get_attribute("data-status") == "stopped")
    assert Conversation.objects.get(owner__username="stop-early").turn_claimed_at is None


# The answer to the first POST of a message breaks right after its `accepted` event (the message is
# stored): a connection dropped while the context was packed.
CUT_AFTER_ACCEPTED = """
const real = window.fetch;
let cut = false;
window.fetch = async (url, options) => {
  const response = await real(url, options);
  if (cut || !/\\/messages\\/$/.test(String(url)) || !options || options.method !== "POST") return response;
  cut = true;
  const source = response.body.getReader();
  const decoder = new TextDecoder();
  let seen = "";
  const body = new ReadableStream({
    async pull(controller) {
      const { value, done } = await source.read();
      if (done) { controller.close(); return; }
      seen += decoder.decode(value, { stream: true });
      const end = seen.indexOf("\\n\\n", seen.indexOf("event: accepted"));
      if (seen.includes("event: accepted") && end >= 0) {
        controller.enqueue(new TextEncoder().encode(seen.slice(0, end + 2)));
        source.cancel();
        controller.error(new TypeError("network error"));
      }
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
};
"""


def test_a_send_whose_connection_closed_before_its_reply_began_shows_the_reply(
    asgi_server, browser, fake_openai, monkeypatch
):
    # The server answers such a send all the same; the page said "The connection closed before the reply
    # started… Retry asks again", and its Retry was refused: "This message already has a reply".
    packing, packed = _echo_chat_packing_held(browser, asgi_server, fake_openai, monkeypatch, "cut-early")
    browser.execute_script(CUT_AFTER_ACCEPTED)
    browser.find_element(By.ID, "composer-input").send_keys("What is a B-tree?", Keys.ENTER)
    assert packing.wait(30)
    bubble = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg--assistant .msg-error-text"))
    assert "Retry" not in bubble.text
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg--assistant .badge--danger")  # nothing failed
    packed.set()

    _the_reply_shown(browser, "cut-early")  # in the waiting one's place
    assert not [b for b in browser.find_elements(By.CSS_SELECTOR, '[data-action="retry"]') if b.is_displayed()]
    assert console_errors(browser) == []


def _the_reply_shown(browser, username: str) -> None:
    """Wait for the reply of `username`'s chat, written without its client, stored complete and shown: the
    only reply on the page."""
    def answered(_):
        return Message.objects.filter(conversation__owner__username=username, role="assistant",
                                      status="complete").first()

    reply = _wait(browser, answered)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f'#m-{reply.pk}[data-status="complete"]'))
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg--assistant")) == 1


def test_a_page_reloaded_while_the_context_is_packed_shows_the_reply_when_it_comes(
    asgi_server, browser, fake_openai, monkeypatch
):
    # The reply goes on being written when the page is reloaded before its first word; the page that came
    # back showed the question alone, and the reply only after another reload.
    packing, packed = _echo_chat_packing_held(browser, asgi_server, fake_openai, monkeypatch, "reload-early")
    browser.find_element(By.ID, "composer-input").send_keys("What is a B-tree?", Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]"))  # stored: `accepted`
    assert packing.wait(30)
    _wait(browser, lambda d: "/c/new/" not in d.current_url)  # the chat's own address
    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]"))
    packed.set()

    _the_reply_shown(browser, "reload-early")
    assert console_errors(browser) == []


def test_a_send_made_again_while_its_context_is_packed_shows_the_reply_when_it_comes(
    asgi_server, browser, fake_openai, monkeypatch
):
    # "Your message had reached the server after all: it is shown with its reply", said the page, which
    # then showed the question alone: its reply, written all the same, came after the page had looked.
    packing, packed = _echo_chat_packing_held(browser, asgi_server, fake_openai, monkeypatch, "again-early")
    browser.execute_script(LOSE_THE_FIRST_ANSWER)
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("What is a B-tree?", Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.ID, "composer-error"))
    assert packing.wait(30)
    box.send_keys(Keys.ENTER)  # sent again, as the error invites: stored already (409 repeated)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]"))
    packed.set()

    _the_reply_shown(browser, "again-early")
    assert _user_texts("again-early") == ["What is a B-tree?"]


def test_a_send_refused_while_another_tabs_context_is_packed_shows_that_reply_when_it_comes(
    asgi_server, browser, fake_openai, monkeypatch
):
    # Told "A reply is still being written… Wait for it or stop it", the tab showed the other tab's
    # question alone, and never the reply it was told to wait for.
    _sign_up_with_model(browser, asgi_server.url, "busy-early", fake_url=fake_openai.base_url,
                        model="fake-echo", name="Echo")
    assert _send(browser, "From tab one: first").get_attribute("data-status") == "complete"
    one, two = _chat_in_a_second_tab(browser)
    packing, packed = _packing_held(monkeypatch)
    browser.switch_to.window(one)
    browser.find_element(By.ID, "composer-input").send_keys("From tab one: second", Keys.ENTER)
    assert packing.wait(30)
    browser.switch_to.window(two)
    browser.find_element(By.ID, "composer-input").send_keys("From tab two: meanwhile", Keys.ENTER)
    _wait(browser, lambda d: "still being written" in d.find_element(By.ID, "composer-error").text)
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg--user[data-id]")) == 2)
    packed.set()

    def answered(_):
        return Message.objects.filter(conversation__owner__username="busy-early", role="assistant",
                                      status="complete").order_by("-id").exclude(content__contains="first").first()

    reply = _wait(browser, answered)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f'#m-{reply.pk}[data-status="complete"]'))
