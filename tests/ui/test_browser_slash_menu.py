"""The message box's "/" menu in a real browser: "/" and the start of a command list the user's saved
prompts (and /compact); ↑ ↓ choose, Enter puts the prompt's text in the box without sending it, Esc
closes the menu and keeps what was typed."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Conversation, Message
from chatapp.chat.prompt_services import prompt_create, prompt_delete, prompt_update
from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _signed_up(browser, base: str, username: str):
    """Signed up in the browser: the new user."""
    _sign_up(browser, base, username)
    return get_user_model().objects.get(username=username)


def _new_chat_box(browser, base: str):
    """A new chat's page opened: its message box."""
    browser.get(f"{base}/c/new/")
    return browser.find_element(By.ID, "composer-input")


def _box_with_numbered_prompts(browser, url: str, username: str, count: int):
    """A new chat's message box, for a user who saved `count` prompts, /p00 ("Prompt 0", "Text 0") on."""
    owner = _signed_up(browser, url, username)
    for i in range(count):
        prompt_create(owner=owner, command=f"p{i:02}", title=f"Prompt {i}", content=f"Text {i}")
    return _new_chat_box(browser, url)


def _box_with_review_prompt(browser, url: str, username: str):
    """A new chat's message box, for a user who saved one prompt, /review."""
    owner = _signed_up(browser, url, username)
    prompt_create(owner=owner, command="review", title="Code review", content="Review this code:")
    return _new_chat_box(browser, url)


def _options(driver) -> list[str]:
    menu = driver.find_element(By.ID, "slash-menu")
    if not menu.is_displayed():
        return []
    return [o.find_element(By.CSS_SELECTOR, ".slash-command").text for o in menu.find_elements(By.CSS_SELECTOR,
                                                                                               "[role=option]")]


def _selected(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, '#slash-menu [aria-selected="true"] .slash-command').text


def test_a_saved_prompt_is_put_in_the_box_from_the_slash_menu(asgi_server, browser):
    owner = _signed_up(browser, asgi_server.url, "slash-keys")
    prompt_create(owner=owner, command="review", title="Code review", content="Review this code for bugs:\n")
    prompt_create(owner=owner, command="eli5", title="Explain simply", content="Explain as to a child:")
    box = _new_chat_box(browser, asgi_server.url)

    box.send_keys("/")
    _wait(browser, lambda d: _options(d) == ["/eli5", "/review", "/compact"])
    assert _selected(browser) == "/eli5"
    box.send_keys(Keys.ARROW_DOWN)
    assert _selected(browser) == "/review"
    assert box.get_attribute("aria-activedescendant") == "slash-option-review"

    box.send_keys(Keys.ESCAPE)  # closes the menu, keeps the text
    _wait(browser, lambda d: _options(d) == [])
    assert box.get_attribute("value") == "/"

    box.send_keys("re")
    _wait(browser, lambda d: _options(d) == ["/review"])
    box.send_keys(Keys.ENTER)

    _wait(browser, lambda d: box.get_attribute("value") == "Review this code for bugs:\n")
    assert _options(browser) == []
    assert browser.switch_to.active_element == box
    assert not Conversation.objects.filter(owner=owner).exists()  # put in the box, not sent

    box.send_keys("def f(): pass", Keys.ENTER)  # finished and sent as any message
    _wait(browser, lambda d: Conversation.objects.filter(owner=owner).exists())
    assert console_errors(browser) == []


def test_compact_typed_whole_compacts_even_beside_a_prompt_whose_command_starts_so(asgi_server, browser):
    # A prompt "/compact-brief" is listed before the box's own /compact by the menu's order (saved
    # prompts first): Enter on "/compact" put the prompt's text in the box instead of compacting.
    owner = _signed_up(browser, asgi_server.url, "slash-compact")
    prompt_create(owner=owner, command="compact-brief", title="Short summary", content="Summarize in 3 lines:")
    box = _new_chat_box(browser, asgi_server.url)

    box.send_keys("/compact")
    _wait(browser, lambda d: _options(d) == ["/compact", "/compact-brief"])
    assert _selected(browser) == "/compact"
    box.send_keys(Keys.ENTER)

    # A new chat has nothing to compact: the compaction was asked for, and said so.
    _wait(browser, lambda d: "nothing to compact" in d.find_element(By.ID, "toasts").text)
    assert box.get_attribute("value") == "/compact"


def test_a_prompt_edited_in_another_tab_is_offered_as_it_now_reads(asgi_server, browser):
    # The menu kept the prompts it had read for 30 s: edited in Settings in another tab, a prompt came
    # back to this tab's menu with its old text (and a deleted one was still offered).
    owner = _signed_up(browser, asgi_server.url, "slash-fresh")
    prompt = prompt_create(owner=owner, command="review", title="Code review", content="Review this:")
    gone = prompt_create(owner=owner, command="retro", title="Retrospective", content="What went well?")
    box = _new_chat_box(browser, asgi_server.url)
    box.send_keys("/re")
    _wait(browser, lambda d: _options(d) == ["/retro", "/review"])
    box.send_keys(Keys.ESCAPE, Keys.BACKSPACE, Keys.BACKSPACE, Keys.BACKSPACE)

    prompt_update(prompt=prompt, content="Review this for security holes:")  # Settings, another tab
    prompt_delete(prompt=gone)

    box.send_keys("/re")
    _wait(browser, lambda d: _options(d) == ["/review"], timeout=10)
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: box.get_attribute("value") == "Review this for security holes:", timeout=10)


def test_a_long_prompt_put_in_the_box_shows_its_end_where_the_cursor_is(asgi_server, browser):
    # A prompt of many lines filled the box showing its first lines, the cursor after its last (where
    # the message is finished) out of view until a key was typed: setting the box's text does not scroll.
    owner = _signed_up(browser, asgi_server.url, "slash-long")
    text = "\n".join(f"Rule {i}: be precise." for i in range(60)) + "\nMy question: "
    prompt_create(owner=owner, command="rules", title="House rules", content=text)
    box = _new_chat_box(browser, asgi_server.url)

    box.send_keys("/rules")
    _wait(browser, lambda d: _options(d) == ["/rules"])
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: box.get_attribute("value") == text)

    scroll_top, scroll_height, client_height, cursor = browser.execute_script(
        "const b = arguments[0]; return [b.scrollTop, b.scrollHeight, b.clientHeight, b.selectionStart];", box)
    assert cursor == len(text)
    assert scroll_height > client_height  # the box is at its tallest: the text scrolls in it
    assert scroll_top + client_height >= scroll_height - 1  # its last line, the cursor's, in view


def test_the_menu_fits_above_the_box_on_a_short_screen(asgi_server, browser):
    # On a phone held sideways (or with its keyboard up) the menu's 280px ran off the top of the screen
    # with its first options, the one chosen among them.
    owner = _signed_up(browser, asgi_server.url, "slash-short")
    for i in range(8):
        prompt_create(owner=owner, command=f"p{i}", title=f"Prompt {i}", content=f"Text {i}")
    browser.set_window_size(844, 390)
    box = _new_chat_box(browser, asgi_server.url)

    box.send_keys("/")
    _wait(browser, lambda d: len(_options(d)) >= 8)
    menu_top, chosen_top, box_top = browser.execute_script(
        "const top = (s) => document.querySelector(s).getBoundingClientRect().top;"
        "return [top('#slash-menu'), top('#slash-menu [aria-selected=true]'), top('#composer-input')];")
    assert 0 <= menu_top <= chosen_top < box_top
    assert _selected(browser) == "/p0"


def test_slash_lists_every_prompt_and_compact_however_many_there_are(asgi_server, browser):
    # The menu showed its first 8 options: with 8 prompts or more "/" listed neither /compact nor any
    # prompt after the 8th by command, and ↓ from the 8th went back to the 1st.
    box = _box_with_numbered_prompts(browser, asgi_server.url, "slash-many", 12)

    box.send_keys("/")
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#slash-menu [role=option]")) > 1)
    commands = browser.execute_script(
        "return [...document.querySelectorAll('#slash-menu .slash-command')].map((c) => c.textContent);")
    assert commands == [f"/p{i:02}" for i in range(12)] + ["/compact"]
    box.send_keys(*[Keys.ARROW_UP] * 2)  # from the first, up goes round to the last, then above it
    assert _selected(browser) == "/p11"  # scrolled into view in the menu
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: box.get_attribute("value") == "Text 11")


_SAFARI_IME_ENTER = (
    # Safari's Enter that picks an input method's characters: sent after compositionend, so isComposing
    # is false; keyCode 229 says it belongs to the composition.
    "arguments[0].dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', keyCode: 229, bubbles: true,"
    " cancelable: true}));"
)


def test_an_input_methods_enter_in_safari_neither_picks_a_prompt_nor_sends(asgi_server, browser):
    # With pinyin, "/rev" is typed in a composition and Enter commits those letters: in Safari that Enter
    # put the prompt in the box (or, in a box with text, sent the message half typed).
    box = _box_with_review_prompt(browser, asgi_server.url, "slash-ime")
    box.send_keys("/rev")
    _wait(browser, lambda d: _options(d) == ["/review"])

    browser.execute_script(_SAFARI_IME_ENTER, box)
    assert box.get_attribute("value") == "/rev"
    assert _options(browser) == ["/review"]

    box.send_keys(Keys.ESCAPE, Keys.BACKSPACE * 4, "日本語の")
    browser.execute_script(_SAFARI_IME_ENTER, box)
    box.send_keys("質問")
    browser.execute_script("arguments[0].form.requestSubmit();", box)  # sent when the user means it
    sent = Message.objects.filter(conversation__owner__username="slash-ime", role="user")
    _wait(browser, lambda d: sent.exists())
    assert list(sent.values_list("content", flat=True)) == ["日本語の質問"]


def test_typing_on_keeps_the_option_chosen_or_goes_back_to_the_first(asgi_server, browser):
    # The option chosen was kept by its place, not by what it was: typed on, the menu narrowed and the
    # same place held another prompt (or /compact), which Enter then put in the box.
    owner = _signed_up(browser, asgi_server.url, "slash-narrow")
    for command, title in (("api", "API docs"), ("bug", "Bug report"), ("bugfix", "Fix it")):
        prompt_create(owner=owner, command=command, title=title, content=f"{title}:")
    box = _new_chat_box(browser, asgi_server.url)

    box.send_keys("/")
    _wait(browser, lambda d: _options(d) == ["/api", "/bug", "/bugfix", "/compact"])
    box.send_keys(Keys.ARROW_DOWN)
    assert _selected(browser) == "/bug"
    box.send_keys("b")
    _wait(browser, lambda d: _options(d) == ["/bug", "/bugfix"])
    assert _selected(browser) == "/bug"  # still listed: still chosen

    box.send_keys(Keys.BACKSPACE)
    _wait(browser, lambda d: len(_options(d)) == 4)
    assert _selected(browser) == "/bug"
    box.send_keys(Keys.ARROW_DOWN)
    assert _selected(browser) == "/bugfix"
    box.send_keys("a")  # /api, then /compact, whose title holds an "a"
    _wait(browser, lambda d: _options(d) == ["/api", "/compact"])
    assert _selected(browser) == "/api"  # no longer listed: the first
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: box.get_attribute("value") == "API docs:")


def test_shift_tab_leaves_the_box_and_puts_no_prompt_in_it(asgi_server, browser):
    # Tab puts the option chosen in the box; Shift+Tab, a keyboard user's way back out of the box, did
    # the same: the prompt's text replaced what was typed and the focus stayed in the box.
    box = _box_with_review_prompt(browser, asgi_server.url, "slash-shift-tab")
    box.send_keys("/re")
    _wait(browser, lambda d: _options(d) == ["/review"])

    box.send_keys(Keys.SHIFT, Keys.TAB, Keys.SHIFT)

    _wait(browser, lambda d: d.switch_to.active_element != box)
    assert box.get_attribute("value") == "/re"
    assert _options(browser) == []


_HOLD_PROMPTS = (
    # The prompts' list answered only once the test says so (a slow connection): window.releasePrompts().
    # window.promptsRead is set in a task after its JSON was read, so after every step the page takes on
    # it (promises, run before any next task).
    "const real = window.fetch; let release; const held = new Promise((r) => { release = r; });"
    "window.releasePrompts = release;"
    "window.fetch = (url, ...rest) => !String(url).startsWith('/api/prompts/') ? real(url, ...rest)"
    "  : held.then(() => real(url, ...rest)).then((res) => {"
    "      const json = res.json.bind(res);"
    "      res.json = () => json().then((data) => { setTimeout(() => { window.promptsRead = true; }); return data; });"
    "      return res; });"
)


def test_the_menu_stays_closed_when_the_box_was_left_before_the_prompts_came(asgi_server, browser):
    # On a slow connection, "/" typed then the box left (a tap elsewhere) before the prompts arrived:
    # the menu opened anyway once they came, over the box, which no longer had the focus to close it.
    box = _box_with_review_prompt(browser, asgi_server.url, "slash-slow")
    browser.execute_script(_HOLD_PROMPTS)
    box.send_keys("/")
    browser.execute_script("arguments[0].blur();", box)

    browser.execute_script("window.releasePrompts();")
    _wait(browser, lambda d: d.execute_script("return window.promptsRead === true;"))

    assert browser.execute_script("return document.getElementById('slash-menu').hidden;")
    assert box.get_attribute("aria-activedescendant") is None


def test_a_long_command_fits_the_menu_on_a_phone(asgi_server, browser):
    # A command may be 40 characters: on a phone's width its option was wider than the menu, which
    # then scrolled sideways, the title cut off behind the right edge.
    owner = _signed_up(browser, asgi_server.url, "slash-narrow-phone")
    command = "translate-to-formal-french-keep-glossary"
    prompt_create(owner=owner, command=command, title="Formal French", content="Translate into formal French:")
    browser.set_window_size(360, 740)
    box = _new_chat_box(browser, asgi_server.url)

    box.send_keys("/tra")
    _wait(browser, lambda d: _options(d) == [f"/{command}"])

    wide, room = browser.execute_script(
        "const m = document.getElementById('slash-menu'); return [m.scrollWidth, m.clientWidth];")
    assert wide <= room
    assert browser.find_element(By.CSS_SELECTOR, "#slash-menu .slash-title").text == "Formal French"  # not cut off


def test_a_press_on_the_menu_beside_its_options_keeps_it_open(asgi_server, browser):
    # A press on the menu's edge, beside the options (a near miss), took the focus from the box to the
    # menu (a scrolling box the browser lets take the focus), and the box's blur closed the menu.
    box = _box_with_numbered_prompts(browser, asgi_server.url, "slash-edge", 20)
    box.send_keys("/")
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#slash-menu [role=option]")) == 21)
    menu = browser.find_element(By.ID, "slash-menu")
    width = menu.rect["width"]

    for x in (-(width // 2) + 3, width // 2 - 4):  # its left edge; its scrollbar, on the right
        ActionChains(browser).move_to_element_with_offset(menu, x, 0).click().perform()
        assert browser.switch_to.active_element == box
        assert len(_options(browser)) == 21

    browser.find_element(By.ID, "slash-option-p03").click()  # an option still picks
    _wait(browser, lambda d: box.get_attribute("value") == "Text 3")


def test_a_screen_reader_is_pointed_at_the_new_option_when_typing_changes_the_one_chosen(asgi_server, browser):
    # Options were named by their place: typed on, "/" → "/b" put /bug where /api was, chosen, and the
    # box's aria-activedescendant kept its value ("slash-option-0"), so a screen reader, told of no
    # change, still read the option it had announced, not the one Enter would now put in the box.
    owner = _signed_up(browser, asgi_server.url, "slash-sr")
    for command, title in (("api", "API docs"), ("bug", "Bug report")):
        prompt_create(owner=owner, command=command, title=title, content=f"{title}:")
    box = _new_chat_box(browser, asgi_server.url)
    box.send_keys("/")
    _wait(browser, lambda d: _options(d) == ["/api", "/bug", "/compact"])
    before = box.get_attribute("aria-activedescendant")

    box.send_keys("b")
    _wait(browser, lambda d: _options(d) == ["/bug"])

    after = box.get_attribute("aria-activedescendant")
    assert after != before
    assert browser.find_element(By.ID, after).get_attribute("aria-selected") == "true"
    assert browser.find_element(By.ID, after).find_element(By.CSS_SELECTOR, ".slash-command").text == "/bug"


def test_a_prompts_variables_are_filled_in_and_its_blank_is_selected_to_type_over(asgi_server, browser):
    # Open WebUI's variables, as its prompts imported here hold them; {{CLIPBOARD}} read once allowed.
    owner = _signed_up(browser, asgi_server.url, "slash-vars")
    prompt_create(owner=owner, command="standup", title="Stand-up",
                  content="{{USER_NAME}}, {{CURRENT_WEEKDAY}} {{CURRENT_DATE}}: about {{topic}}, see {{CLIPBOARD}}")
    box = _new_chat_box(browser, asgi_server.url)
    browser.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": asgi_server.url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"],
    })
    browser.execute_async_script("navigator.clipboard.writeText('the {{draft}} notes').then(arguments[0])")
    days = [dt.date.today(), dt.date.today() + dt.timedelta(days=1)]  # a run across midnight

    box.send_keys("/stand")
    _wait(browser, lambda d: _options(d) == ["/standup"])
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: box.get_attribute("value").startswith("slash-vars, "))
    assert box.get_attribute("value") in {
        f"slash-vars, {day:%A} {day:%Y-%m-%d}: about {{{{topic}}}}, see the {{{{draft}}}} notes" for day in days
    }
    selected = browser.execute_script("const b = arguments[0]; return b.value.slice(b.selectionStart, b.selectionEnd)",
                                      box)
    assert selected == "{{topic}}"  # the prompt's blank, not the clipboard's text
    box.send_keys("the release")
    assert "about the release, see" in box.get_attribute("value")
    assert console_errors(browser) == []


def test_a_clipboard_the_page_may_not_read_is_left_as_the_blank_to_paste_over(asgi_server, browser):
    owner = _signed_up(browser, asgi_server.url, "slash-noclip")
    prompt_create(owner=owner, command="fix", title="Fix", content="Fix the grammar of: {{CLIPBOARD}}")
    box = _new_chat_box(browser, asgi_server.url)
    browser.execute_cdp_cmd("Browser.setPermission", {
        "origin": asgi_server.url, "permission": {"name": "clipboard-read"}, "setting": "denied",
    })

    box.send_keys("/fix")
    _wait(browser, lambda d: _options(d) == ["/fix"])
    box.send_keys(Keys.ENTER)
    _wait(browser, lambda d: box.get_attribute("value") == "Fix the grammar of: {{CLIPBOARD}}")
    selected = browser.execute_script("const b = arguments[0]; return b.value.slice(b.selectionStart, b.selectionEnd)",
                                      box)
    assert selected == "{{CLIPBOARD}}"
    assert console_errors(browser) == []
