"""A reasoning model's reply in the browser: its thinking streams into an open "Thinking…" block above
the answer, folds away once the answer starts, opens on a click, and is drawn the same after a reload."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Message
from tests.support.fake_openai import thinking_text
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _thinking(reply):
    return reply.find_element(By.CSS_SELECTOR, ".msg-thinking")


@pytest.mark.parametrize("model", ["think-inline-120", "think-fields-120", "think-unopened-120"])
def test_the_thinking_streams_open_then_folds_above_the_answer(asgi_server, browser, fake_openai, model):
    _sign_up_with_model(browser, asgi_server.url, f"thinker-{model[6:12]}", fake_url=fake_openai.base_url,
                        model=model, name="Thinker")
    browser.find_element(By.ID, "composer-input").send_keys("Where did we leave the bikes?", Keys.ENTER)

    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming"))[0]
    if "unopened" not in model:
        # While the model thinks: the block is open, says so, and the answer has not begun. (A block the
        # template opened is told apart only once the reply is whole: it streams as text.)
        _wait(browser, lambda d: _thinking(reply).find_element(By.CSS_SELECTOR, ".msg-thinking-text").text.strip())
        assert _thinking(reply).get_attribute("open") is not None
        assert _thinking(reply).find_element(By.CSS_SELECTOR, ".msg-thinking-label").text == "Thinking…"
        assert not reply.find_element(By.CSS_SELECTOR, ".msg-content").text.strip()

    _wait(browser, lambda d: reply.get_attribute("data-status") == "complete")
    thought = thinking_text(fake_openai.completions[-1].messages)
    stored = Message.objects.get(pk=int(reply.get_attribute("data-id")))
    assert stored.reasoning == thought
    box = _thinking(reply)
    assert box.get_attribute("open") is None and "is-done" in box.get_attribute("class")
    assert box.find_element(By.CSS_SELECTOR, ".msg-thinking-label").text == "Thinking"
    answer = reply.find_element(By.CSS_SELECTOR, ".msg-content").text
    assert answer.startswith("Echo:") and "Thinking it over" not in answer

    box.find_element(By.CSS_SELECTOR, "summary").click()
    _wait(browser, lambda d: box.find_element(By.CSS_SELECTOR, ".msg-thinking-text").text == thought)

    browser.refresh()
    again = _wait(browser, lambda d: d.find_elements(By.ID, f"m-{stored.pk}"))[0]
    box = _thinking(again)
    assert box.get_attribute("open") is None
    assert box.get_attribute("textContent").count(thought) == 1
    assert "Thinking it over" not in again.find_element(By.CSS_SELECTOR, ".msg-content").text


def test_a_followed_reply_s_thinking_stays_as_the_reader_left_it(asgi_server, browser, fake_openai):
    # Reloaded while the model thinks, the page follows the reply from the server, redrawing it every
    # few seconds: the block is drawn open, as the streaming page draws it, and what the reader does with
    # it (fold it from the keyboard) holds through those rounds instead of snapping back, focus included.
    _sign_up_with_model(browser, asgi_server.url, "thinker-follow", fake_url=fake_openai.base_url,
                        model="think-fields-400", name="Thinker")
    browser.find_element(By.ID, "composer-input").send_keys("Where did we leave the bikes?", Keys.ENTER)
    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming[data-id]"))[0]
    reply_id = reply.get_attribute("data-id")
    # The checkpoint (every few seconds) holds some thinking and no answer yet.
    _wait(browser, lambda d: Message.objects.filter(pk=int(reply_id)).exclude(reasoning=None).exists())
    browser.refresh()

    box = _thinking(_wait(browser, lambda d: d.find_elements(By.ID, f"m-{reply_id}"))[0])
    assert box.get_attribute("open") is not None
    assert box.find_element(By.CSS_SELECTOR, ".msg-thinking-label").text == "Thinking…"
    summary = box.find_element(By.CSS_SELECTOR, "summary")
    browser.execute_script("arguments[0].focus()", summary)
    summary.send_keys(Keys.ENTER)
    _wait(browser, lambda d: box.get_attribute("open") is None)

    # Past a follow round (FOLLOW_EVERY_MS) the node was redrawn, and the block is still folded and focused.
    _wait(browser, lambda d: _thinking(d.find_element(By.ID, f"m-{reply_id}")) != box, timeout=10)
    redrawn = _thinking(browser.find_element(By.ID, f"m-{reply_id}"))
    assert redrawn.get_attribute("open") is None
    assert browser.switch_to.active_element == redrawn.find_element(By.CSS_SELECTOR, "summary")

    _wait(browser, lambda d: d.find_element(By.ID, f"m-{reply_id}").get_attribute("data-status") == "complete")
    done = _thinking(browser.find_element(By.ID, f"m-{reply_id}"))
    assert done.get_attribute("open") is None and "is-done" in done.get_attribute("class")
    assert done.find_element(By.CSS_SELECTOR, ".msg-thinking-label").text == "Thinking"


def _thinking_js(browser, asgi_server, fake_openai, username: str, body: str):
    """Run `body` (JavaScript with `thinkingAdd`, `thinkingEnd`, a fresh reply `article` in the timeline
    and `done`) on a chat page, with the page's own thinking.js; what it passes to `done`."""
    _sign_up_with_model(browser, asgi_server.url, username, fake_url=fake_openai.base_url, model="think-fields",
                        name="Thinker")
    browser.get(f"{asgi_server.url}/")
    _wait(browser, lambda d: d.find_elements(By.ID, "composer-input"))
    return browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import("/static/js/chat/thinking.js").then(({ thinkingAdd, thinkingEnd }) => {
          const article = document.createElement("article");
          article.innerHTML = '<div class="msg-content"></div>';
          document.getElementById("messages").append(article);
    """ + body + """
        }).catch((e) => done(String(e)));
    """)


def test_a_long_thinking_streams_in_view_in_its_box_unless_the_reader_scrolled_up(asgi_server, browser, fake_openai):
    # The box is held to a max-height; the newest thinking must not grow out of sight below it.
    following, top, overflowing = _thinking_js(browser, asgi_server, fake_openai, "thinker-long", """
          const body = () => article.querySelector(".msg-thinking-text");
          const gap = () => body().scrollHeight - body().scrollTop - body().clientHeight;
          for (let i = 0; i < 80; i += 1) thinkingAdd(article, `Step ${i}: weigh it once more.\\n`);
          const following = gap();
          body().scrollTop = 0;  // the reader scrolls up to read the start
          thinkingAdd(article, "One more step.\\n");
          done([following, body().scrollTop, body().scrollHeight > body().clientHeight]);
    """)
    assert overflowing
    assert following < 2
    assert top == 0


def test_a_stopped_reply_whose_template_opened_the_block_shows_its_thinking_apart(asgi_server, browser, fake_openai):
    # Told apart only when the reply is stored, the thinking arrives with the final event: a stopped
    # reply (an `error` event, as a failed one) must draw it too, not only a complete one.
    _sign_up_with_model(browser, asgi_server.url, "thinker-stop", fake_url=fake_openai.base_url,
                        model="think-unopened-300", name="Thinker")
    browser.find_element(By.ID, "composer-input").send_keys("Where did we leave the bikes?", Keys.ENTER)
    reply = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming"))[0]
    _wait(browser, lambda d: "Echo:" in reply.find_element(By.CSS_SELECTOR, ".msg-content").text)
    browser.find_element(By.ID, "composer-input").send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: reply.get_attribute("data-status") == "stopped")

    stored = Message.objects.get(pk=int(reply.get_attribute("data-id")))
    assert stored.reasoning and stored.content.startswith("Echo:")
    box = _thinking(reply)
    assert box.get_attribute("open") is None
    assert box.find_element(By.CSS_SELECTOR, ".msg-thinking-text").get_attribute("textContent") == stored.reasoning
    assert "Thinking it over" not in reply.find_element(By.CSS_SELECTOR, ".msg-content").text


def test_a_streamed_block_s_chevron_turns_as_the_server_drawn_one_does(asgi_server, browser, fake_openai):
    # The block drawn while the reply streams must say folded or open as the one a reload draws does:
    # its chevron pointed down (open) once folded, so a folded thinking looked already open.
    open_turn, folded_turn = _thinking_js(browser, asgi_server, fake_openai, "thinker-chevron", """
          thinkingAdd(article, "Weigh it.");
          const chevron = article.querySelector(".msg-thinking summary svg");
          chevron.style.transition = "none"; // the turned state itself, not a moment of its turning
          const turn = () => getComputedStyle(chevron).transform;
          const open = turn();
          thinkingEnd(article);
          done([open, turn()]);
    """)
    assert open_turn == "none"
    assert folded_turn not in ("none", open_turn)
