"""Two tabs of one browser: what one does to the chats list shows in the other's sidebar at once (it
showed only after that tab redrew its list for a reason of its own, or a reload): a rename, a pin, a
new folder, a chat deleted (the tab showing it says so), a reply that moves a chat to the top."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.folder_models import Folder
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation
from chatapp.chat.search_services import conversation_index_rebuild
from tests.support.browser import console_errors, tabs_close_but
from tests.ui.test_browser import _send, _sign_up_with_model, _wait
from tests.ui.test_browser_focus_kept import _confirm, _press, _tab_to_delete
from tests.ui.test_browser_folders import _folders
from tests.ui.test_browser_pin import _press_pin, _sections
from tests.ui.test_browser_sidebar_rename import _chat, _rename_from_sidebar

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _titles(driver) -> list[str]:
    return [t.get_attribute("textContent") for t in driver.find_elements(By.CSS_SELECTOR, "#conv-nav .conv-title")]


@pytest.fixture
def two_tabs(asgi_server, browser, fake_openai):
    """A user with two chats, the older first, open in two tabs: (first tab, second tab, older, newer)."""
    _sign_up_with_model(
        browser, asgi_server.url, "two-tabs", fake_url=fake_openai.base_url, model="fake-echo", name="Echo"
    )
    older, newer = _chat("two-tabs", "Lisbon trip"), _chat("two-tabs", "Garden plans")
    browser.get(f"{asgi_server.url}/c/{older.pk}/")
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(f"{asgi_server.url}/c/{newer.pk}/")
    second = browser.current_window_handle
    _wait(browser, lambda d: _titles(d) == ["Garden plans", "Lisbon trip"])
    yield first, second, older, newer
    tabs_close_but(browser, first)


def test_a_rename_a_pin_and_a_folder_in_one_tab_show_in_the_other(browser, two_tabs):
    first, second, older, _ = two_tabs
    browser.switch_to.window(first)
    _, field = _rename_from_sidebar(browser, older)
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys("Porto trip", Keys.ENTER)
    _press_pin(browser, older)
    browser.find_element(By.CSS_SELECTOR, '[data-action="new-folder"]').click()
    field = browser.find_element(By.ID, "folder-name-input")
    _wait(browser, lambda d: d.switch_to.active_element == field)
    field.send_keys("Travel", Keys.ENTER)
    _wait(browser, lambda d: [name for name, _ in _folders(d)] == ["Travel"])

    browser.switch_to.window(second)
    _wait(browser, lambda d: _sections(d)[:1] == [("Pinned", ["Porto trip"])], timeout=10)
    _wait(browser, lambda d: [name for name, _ in _folders(d)] == ["Travel"], timeout=10)
    assert "Lisbon trip" not in _titles(browser)
    assert console_errors(browser) == []


def test_a_reply_in_one_tab_moves_its_chat_up_in_the_other(browser, two_tabs):
    first, second, _, _ = two_tabs
    browser.switch_to.window(first)  # the older chat
    _send(browser, "Which day do we leave?")

    browser.switch_to.window(second)
    _wait(browser, lambda d: _titles(d)[:1] == ["Lisbon trip"], timeout=10)
    assert console_errors(browser) == []


def test_the_chat_shown_deleted_in_another_tab_is_said_to_be_gone(browser, two_tabs):
    first, second, _, newer = two_tabs
    browser.switch_to.window(first)
    # the page's own API client, as its Delete button uses it (the dialog is another test's)
    browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        f"Longchat.api('/api/conversations/{newer.pk}/', {{method: 'DELETE'}}).then(done);"
    )

    browser.switch_to.window(second)
    _wait(browser, lambda d: "deleted in another tab" in d.find_element(By.ID, "toasts").text, timeout=10)
    _wait(browser, lambda d: _titles(d) == ["Lisbon trip"], timeout=10)


def _rename_elsewhere(browser, tab, chat, title):
    """Another tab renames `chat` through the page's own API client (its sidebar then tells the others)."""
    here = browser.current_window_handle
    browser.switch_to.window(tab)
    browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        f"Longchat.api('/api/conversations/{chat.pk}/', {{method: 'PATCH', body: {{title: '{title}'}}}}).then(done);"
    )
    browser.switch_to.window(here)


def test_a_redraw_heard_under_a_delete_being_confirmed_leaves_the_focus_in_the_list(browser, two_tabs):
    # The list was drawn again under the open dialog: the dialog gave the focus back to a Delete no
    # longer on the page, and the keyboard user was thrown to the top of the page (Cancel), or stayed
    # there with the chat deleted (Delete), not on the next chat.
    first, second, older, newer = two_tabs
    browser.switch_to.window(second)
    _tab_to_delete(browser, browser.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{older.pk}"]'))
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    cancel = _confirm(browser)
    _rename_elsewhere(browser, first, newer, "Garden redone")
    _wait(browser, lambda d: "Garden redone" in _titles(d), timeout=10)
    cancel.send_keys(Keys.ENTER)
    _wait(browser, lambda d: not d.find_element(By.ID, "confirm-dialog").get_attribute("open"))
    delete = browser.find_element(
        By.CSS_SELECTOR, f'.conv-item[data-id="{older.pk}"] [data-action="delete-conversation"]'
    )
    _wait(browser, lambda d: d.switch_to.active_element == delete)  # was BODY

    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _confirm(browser, "confirm-ok")
    _rename_elsewhere(browser, first, newer, "Garden again")
    _wait(browser, lambda d: "Garden again" in _titles(d), timeout=10)
    browser.find_element(By.ID, "confirm-ok").send_keys(Keys.ENTER)
    _wait(browser, lambda d: _titles(d) == ["Garden again"])
    assert browser.switch_to.active_element == browser.find_element(
        By.CSS_SELECTOR, f'.conv-item[data-id="{newer.pk}"] .conv-link'
    )  # was BODY
    assert console_errors(browser) == []


def test_a_redraw_heard_with_a_folder_menu_open_gives_the_focus_to_its_menu_button(browser, two_tabs):
    # The menu item that had the focus was redrawn in a closed menu: the focus went to the first chat
    # of the folder, or to the page when the folder was empty or folded.
    first, second, older, newer = two_tabs
    folder = Folder.objects.create(owner=older.owner, name="Travel")
    Conversation.objects.filter(pk=older.pk).update(folder=folder)
    browser.switch_to.window(second)
    browser.refresh()
    button = _wait(browser, lambda d: d.find_element(By.ID, f"folder-menu-btn-{folder.pk}"))
    _press(browser, button)
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("data-action") == "rename-folder")
    _rename_elsewhere(browser, first, newer, "Garden redone")
    _wait(browser, lambda d: "Garden redone" in _titles(d), timeout=10)
    button = browser.find_element(By.ID, f"folder-menu-btn-{folder.pk}")
    _wait(browser, lambda d: d.switch_to.active_element == button)
    assert button.get_attribute("aria-expanded") == "false"
    assert console_errors(browser) == []


def test_settings_archive_all_and_delete_show_in_the_other_tabs(browser, two_tabs):
    # Settings' Archived chats are form posts, not the API: the other tabs heard none of them, their
    # sidebars listed every chat archived until a reload, and the tab showing a chat deleted there did
    # not say it was gone.
    first, second, older, _ = two_tabs
    browser.switch_to.window(second)
    browser.get(browser.current_url.split("/c/")[0] + "/settings/")
    browser.execute_script("arguments[0].click()", browser.find_element(By.ID, "archive-all"))
    _confirm(browser, "confirm-ok").click()
    delete = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'[aria-label="Delete “{older.title}”"]'))

    browser.switch_to.window(first)
    _wait(browser, lambda d: "Garden plans" not in _titles(d), timeout=10)

    browser.switch_to.window(second)
    browser.execute_script("arguments[0].click()", delete)
    _confirm(browser, "confirm-ok").click()
    _wait(browser, lambda d: "deleted" in d.find_element(By.ID, "toasts").text)

    browser.switch_to.window(first)
    _wait(browser, lambda d: "deleted in another tab" in d.find_element(By.ID, "toasts").text, timeout=10)
    assert console_errors(browser) == []


def test_a_redraw_heard_keeps_the_focus_on_the_search_hit_it_was_on(browser, two_tabs):
    # The focus on a search hit under a chat went to the chat's own link when another tab's change drew
    # the list again: a keyboard user stepping through the hits was thrown back up to the chat's title.
    first, second, older, _ = two_tabs
    message_append(conversation=older, role="user", token_model="gpt-4o-mini", content="the quokka photos")
    conversation_index_rebuild(conversation=older)
    browser.switch_to.window(second)
    browser.find_element(By.ID, "chat-search").send_keys("quokka")
    hit = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{older.pk}"] .conv-hit'))
    href = hit.get_attribute("href")
    _press(browser, hit, Keys.SHIFT)  # a keyboard user on the hit
    _rename_elsewhere(browser, first, older, "Lisbon quokka")
    _wait(browser, lambda d: _titles(d) == ["Lisbon quokka"], timeout=10)
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("href") == href)
    assert "conv-hit" in browser.switch_to.active_element.get_attribute("class")
    assert console_errors(browser) == []


HOLD_FIRST_SEARCH = """
const real = window.fetch;
let held = false;
window.__release = null;
window.fetch = (url, options) => {
  if (!held && String(url).includes("q=quokka")) {
    held = true;
    return new Promise((resolve) => { window.__release = () => resolve(real(url, options)); });
  }
  return real(url, options);
};
"""


def test_a_search_answered_after_a_redraw_heard_is_still_said(browser, two_tabs):
    # The search typed was read out ("1 chat matches …") only from its own answer: a redraw heard from
    # another tab meanwhile superseded it, and a screen reader heard nothing of what the search found.
    first, second, older, _ = two_tabs
    message_append(conversation=older, role="user", token_model="gpt-4o-mini", content="the quokka photos")
    conversation_index_rebuild(conversation=older)
    browser.switch_to.window(second)
    browser.execute_script(HOLD_FIRST_SEARCH)
    browser.find_element(By.ID, "chat-search").send_keys("quokka")
    _wait(browser, lambda d: d.execute_script("return window.__release !== null"))  # the search asked, held
    _rename_elsewhere(browser, first, older, "Lisbon quokka")
    _wait(browser, lambda d: _titles(d) == ["Lisbon quokka"], timeout=10)  # the redraw heard, with the search
    browser.execute_script("window.__release()")  # the search's own answer, superseded
    _wait(browser, lambda d: d.find_element(By.ID, "search-status").get_attribute("textContent") != "")
    assert browser.find_element(By.ID, "search-status").get_attribute("textContent") == "1 chat matches “quokka”."
