"""A long message of yours is folded in a real browser (js/chat/fold.js): taller than 14 lines, it shows
10 under a fade with a "Show more" / "Show less" button, as loaded with the page, paged in, just sent
and opened from a search hit; the model's replies are never folded; Copy and Edit take the whole text;
the lines beyond the fold are hidden until found, so the browser's find in page reveals them."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.branch_services import conversation_path_thread
from chatapp.chat.models import Conversation, Message
from chatapp.chat.search_services import conversation_index_rebuild
from tests.support.browser import console_errors
from tests.ui.test_browser import _send, _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LOG = "\n".join(f"2024-05-01 12:{i // 60:02d}:{i % 60:02d} INFO worker[{i % 7}] processed job {i * 7}"
                for i in range(300))
UNDER = "\n".join(f"step {i}: check the cable" for i in range(1, 14))  # 13 lines: not folded
REPLY = "\n\n".join(f"Paragraph {i} of a long answer, which is never folded." for i in range(60))

# The message's text box: lines shown, lines it holds, whether it has a fade drawn in its own colour.
BOX = """
const content = arguments[0].querySelector('.msg-content');
const style = getComputedStyle(content);
const line = parseFloat(style.lineHeight);
const fade = getComputedStyle(content, '::after');
return {shown: content.clientHeight / line, whole: content.scrollHeight / line,
        fade: fade.content !== 'none' && fade.backgroundImage.includes(style.backgroundColor)};
"""

WHOLE = "return arguments[0].clientHeight === arguments[0].scrollHeight"  # the text box shows all it holds


def _chat(user, contents: list[tuple[str, str]]) -> tuple[Conversation, list[Message]]:
    chat = Conversation.objects.create(owner=user, title="Pasted logs", offline=True)
    messages = Message.objects.bulk_create([
        Message(conversation=chat, role=role, content=content, token_count=len(content) // 4, char_count=len(content))
        for role, content in contents
    ])
    conversation_path_thread(conversation_id=chat.pk)
    return chat, messages


def _fold_button(article):
    buttons = article.find_elements(By.CSS_SELECTOR, "button.msg-fold")
    return buttons[0] if buttons else None


def _folded(article) -> bool:
    button = _fold_button(article)
    return bool(button) and "is-folded" in article.get_attribute("class").split() \
        and button.get_attribute("aria-expanded") == "false" and button.text == "Show more"


def _top(browser, element) -> float:
    return browser.execute_script("return arguments[0].getBoundingClientRect().top", element)


def test_long_messages_of_yours_are_folded_as_loaded_paged_in_and_sent(asgi_server, browser):
    base = asgi_server.url
    _sign_up(browser, base, "fold-pages")
    user = get_user_model().objects.get(username="fold-pages")
    filler = [("user" if i % 2 == 0 else "assistant", f"filler message {i}") for i in range(110)]
    chat, messages = _chat(user, [("user", LOG), ("assistant", "Noted."), *filler,
                                  ("user", LOG), ("assistant", REPLY), ("user", UNDER), ("assistant", "Done.")])
    paged, _, *_rest = messages
    loaded, reply, under = messages[-4:-1]
    browser.get(f"{base}/c/{chat.pk}/")

    # Loaded with the page: 10 lines of 300 show, faded, with the button to show the rest.
    article = _wait(browser, lambda d: d.find_element(By.ID, f"m-{loaded.pk}"))
    assert _folded(article)
    box = browser.execute_script(BOX, article)
    assert 9.9 < box["shown"] < 11 and box["whole"] > 290 and box["fade"], box
    button = _fold_button(article)
    content = article.find_element(By.CSS_SELECTOR, ".msg-content")
    assert button.tag_name == "button" and button.get_attribute("aria-controls") == content.get_attribute("id")
    # A message of 13 lines reads at a glance; a reply is never folded, however long.
    for short in (under, reply):
        item = browser.find_element(By.ID, f"m-{short.pk}")
        assert _fold_button(item) is None and "is-folded" not in item.get_attribute("class")
    assert browser.execute_script(BOX, browser.find_element(By.ID, f"m-{reply.pk}"))["shown"] > 60

    # Paged in by "Load earlier messages": folded too.
    more = browser.find_element(By.CSS_SELECTOR, '[data-action="load-earlier"]')
    browser.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", more)
    more.click()
    older = _wait(browser, lambda d: d.find_element(By.ID, f"m-{paged.pk}"))
    assert _folded(older)
    assert browser.execute_script(BOX, older)["shown"] < 11

    # Just sent: folded as soon as it is in the timeline.
    sent = "\n".join(f"traceback frame {i}" for i in range(30))
    _send(browser, sent)
    mine = browser.find_elements(By.CSS_SELECTOR, ".msg--user")[-1]
    assert mine.find_element(By.CSS_SELECTOR, ".msg-source").get_attribute("value") == sent
    assert _folded(mine)
    assert console_errors(browser) == []


def test_show_more_and_show_less_from_the_keyboard_copy_and_edit(asgi_server, browser):
    base = asgi_server.url
    _sign_up(browser, base, "fold-keys")
    user = get_user_model().objects.get(username="fold-keys")
    # messages before and after it: the timeline can scroll wherever folding leaves it
    around = [("user" if i % 2 == 0 else "assistant", f"small talk {i}") for i in range(20)]
    chat, messages = _chat(user, [*around, ("user", LOG), ("assistant", "Noted."), *around])
    long_msg, after = messages[20:22]
    browser.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": base, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    browser.get(f"{base}/c/{chat.pk}/")
    article = _wait(browser, lambda d: d.find_element(By.ID, f"m-{long_msg.pk}"))
    button = _fold_button(article)
    content = article.find_element(By.CSS_SELECTOR, ".msg-content")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'}); arguments[0].focus()",
                           button)
    top = _top(browser, article)

    # Enter shows it whole, opening downwards: nothing above moves, the focus stays on the button.
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _wait(browser, lambda d: button.get_attribute("aria-expanded") == "true" and button.text == "Show less")
    _wait(browser, lambda d: d.execute_script(WHOLE, content))
    assert "is-folded" not in article.get_attribute("class").split()
    assert browser.switch_to.active_element == button
    assert abs(_top(browser, article) - top) < 1

    # Space folds it again from its end, read down to there: the button stays where it was on screen,
    # and so does the next message (only the folded message changed).
    browser.execute_script("arguments[0].scrollIntoView({block: 'end', behavior: 'instant'})", button)
    following = browser.find_element(By.ID, f"m-{after.pk}")
    at, next_at = _top(browser, button), _top(browser, following)
    ActionChains(browser).send_keys(Keys.SPACE).perform()
    _wait(browser, lambda d: _folded(article))
    assert browser.switch_to.active_element == button
    assert abs(_top(browser, button) - at) < 1 and abs(_top(browser, following) - next_at) < 1

    # Folded, Copy copies the whole message.
    browser.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", article)
    ActionChains(browser).move_to_element(article).perform()
    article.find_element(By.CSS_SELECTOR, '[data-action="copy-message"]').click()
    _wait(browser, lambda d: [t for t in d.find_elements(By.CSS_SELECTOR, "#toasts .toast") if "Copied" in t.text])
    pasted = browser.execute_async_script(
        "const done = arguments[0]; navigator.clipboard.readText().then(done, (e) => done('error: ' + e));")
    assert pasted == LOG

    # Edit opens the whole text; the fold's button is not shown meanwhile, and is back after.
    article.find_element(By.CSS_SELECTOR, '[data-action="edit-message"]').click()
    area = _wait(browser, lambda d: article.find_element(By.CSS_SELECTOR, ".msg-edit-input"))
    assert area.get_attribute("value") == LOG
    assert not button.is_displayed()
    area.send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: not article.find_elements(By.CSS_SELECTOR, ".msg-edit"))
    assert button.is_displayed() and _folded(article)

    # Shown whole, it slides open; with reduced motion asked for, it does not move. In the dark theme
    # the fade is drawn in the dark bubble's colour.
    opening = "arguments[0].click(); return arguments[1].getAnimations().length"
    assert browser.execute_script(opening, button, content) == 1
    browser.execute_script("arguments[0].click()", button)
    _wait(browser, lambda d: _folded(article))
    # Shown whole and folded again before the slide ends: the slide stops, the box does not stay open.
    twice = "arguments[0].click(); arguments[0].click(); return arguments[1].getAnimations().length"
    assert browser.execute_script(twice, button, content) == 0 and _folded(article)
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
        {"name": "prefers-reduced-motion", "value": "reduce"}, {"name": "prefers-color-scheme", "value": "dark"}]})
    _wait(browser, lambda d: d.execute_script("return document.documentElement.dataset.theme") == "dark")
    # A theme switch is itself a transition (reduced motion shortens it to nothing, not to no frame):
    # read in the frame it starts, the colours are still the light ones.
    _wait(browser, lambda d: d.execute_script(BOX, article)["fade"])
    assert browser.execute_script(opening, button, content) == 0
    assert browser.execute_script(WHOLE, content)
    assert console_errors(browser) == []


def test_a_narrowed_window_folds_a_message_grown_long(asgi_server, browser):
    base = asgi_server.url
    _sign_up(browser, base, "fold-narrow")
    user = get_user_model().objects.get(username="fold-narrow")
    # 12 lines on a laptop; each takes two on a phone
    wide = "\n".join(f"{i:02d} the quick brown fox jumps over the lazy dog, then naps in the sun" for i in range(12))
    chat, (message, *_rest) = _chat(user, [("user", wide), ("assistant", "Noted.")])
    browser.get(f"{base}/c/{chat.pk}/")
    article = _wait(browser, lambda d: d.find_element(By.ID, f"m-{message.pk}"))
    assert _fold_button(article) is None

    browser.set_window_size(390, 844)
    _wait(browser, lambda d: _folded(article))
    browser.set_window_size(1366, 900)
    _wait(browser, lambda d: _fold_button(article) is None and "is-folded" not in article.get_attribute("class"))
    assert console_errors(browser) == []


def test_a_search_hit_opens_its_long_message_whole_with_the_word_in_view(asgi_server, browser):
    base = asgi_server.url
    _sign_up(browser, base, "fold-search")
    user = get_user_model().objects.get(username="fold-search")
    pasted = LOG.replace("processed job 1876", "processed job 1876 for the quokka census")  # line 268 of 300
    assert pasted != LOG
    later = [("user" if i % 2 == 0 else "assistant", f"later message {i}") for i in range(120)]
    chat, (target, *_rest) = _chat(user, [("user", pasted), ("assistant", "Noted."), *later])
    conversation_index_rebuild(conversation=chat)
    browser.get(f"{base}/c/new/")
    browser.find_element(By.ID, "chat-search").send_keys("quokka")
    hit = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{chat.pk}"] .conv-hit'))
    hit.click()

    message = _wait(browser, lambda d: d.find_element(By.ID, f"m-{target.pk}"))
    _wait(browser, lambda d: message.find_elements(By.CSS_SELECTOR, "mark.search-mark"))
    button = _fold_button(message)
    assert button is not None and button.get_attribute("aria-expanded") == "true"
    assert "is-folded" not in message.get_attribute("class").split()
    mark = message.find_element(By.CSS_SELECTOR, "mark.search-mark")
    assert mark.text == "quokka"
    # The marked word is on screen, inside the timeline's view, not only in the page.
    in_view = ("const m = arguments[0].getBoundingClientRect(), t = document.getElementById('timeline')"
               ".getBoundingClientRect(); return m.top >= t.top && m.bottom <= t.bottom")
    _wait(browser, lambda d: d.execute_script(in_view, mark))
    assert console_errors(browser) == []

    # Shown once: the address forgets the message, so a reload opens the chat at its end, as any load
    # does (before, every reload went back to the hit, its long message unfolded).
    _wait(browser, lambda d: "#m-" not in d.current_url)
    browser.refresh()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant"))
    at_end = ("const t = document.getElementById('timeline');"
              "return t.scrollHeight - t.scrollTop - t.clientHeight < 80")
    _wait(browser, lambda d: d.execute_script(at_end))
    assert not browser.find_elements(By.CSS_SELECTOR, f"#m-{target.pk}:not(.is-folded)")


# The folded message's text: what shows, what is hidden until found (find in page reaches it), and all
# of it as the page holds it.
PARTS = """
const content = arguments[0].querySelector('.msg-content');
const rest = content.querySelector('[hidden="until-found"]');
let shown = '';
for (const node of content.childNodes) if (node !== rest) shown += node.textContent;
// Find in page looks in a hidden-until-found element the page lays out (not display: none).
const findable = rest !== null && getComputedStyle(rest).display !== 'none'
  && getComputedStyle(rest).contentVisibility === 'hidden';
return {shown, rest: rest ? rest.textContent : null, whole: content.textContent, findable};
"""


def test_find_in_page_reaches_the_folded_text_and_reveals_it(asgi_server, browser):
    # Ctrl+F found a word beyond the fold but could not show it: the text was only clipped. It is now
    # in an element hidden until found, which the browser reveals (firing beforematch on it) to show a
    # match; the message then shows whole, its button saying so.
    base = asgi_server.url
    _sign_up(browser, base, "fold-find")
    user = get_user_model().objects.get(username="fold-find")
    chat, (message, *_rest) = _chat(user, [("user", LOG), ("assistant", "Noted.")])
    browser.get(f"{base}/c/{chat.pk}/")
    article = _wait(browser, lambda d: d.find_element(By.ID, f"m-{message.pk}"))
    assert _folded(article)
    lines = LOG.split("\n")
    parts = browser.execute_script(PARTS, article)
    assert parts["shown"].rstrip("\n") == "\n".join(lines[:10]), parts["shown"]
    assert parts["rest"] is not None and parts["rest"].lstrip("\n") == "\n".join(lines[10:])
    assert parts["whole"] == LOG  # the text once, nothing lost at the fold
    assert parts["findable"]
    assert 9.9 < browser.execute_script(BOX, article)["shown"] < 11

    # What the browser does for a match in line 268: beforematch on the hidden element, which it then shows.
    browser.execute_script("""
        const rest = arguments[0].querySelector('[hidden="until-found"]');
        rest.dispatchEvent(new Event('beforematch', {bubbles: true}));
        rest.removeAttribute('hidden');""", article)
    button = _fold_button(article)
    _wait(browser, lambda d: button.get_attribute("aria-expanded") == "true" and button.text == "Show less")
    assert "is-folded" not in article.get_attribute("class").split()
    content = article.find_element(By.CSS_SELECTOR, ".msg-content")
    assert browser.execute_script(WHOLE, content)
    assert browser.execute_script(BOX, article)["shown"] > 290

    # Folded again, the text beyond the fold is hidden until found again, and still held once.
    browser.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", button)
    button.click()
    _wait(browser, lambda d: _folded(article))
    parts = browser.execute_script(PARTS, article)
    assert parts["rest"] is not None and parts["whole"] == LOG and parts["findable"]
    assert parts["shown"].rstrip("\n") == "\n".join(lines[:10])
    assert console_errors(browser) == []
