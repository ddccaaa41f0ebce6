"""Chat folders in a real browser: New folder from the keyboard (a clash said in the dialog), the chat
shown moved into it from its header menu's "Move to folder…", the folder folded and opened (kept
folded across a reload), then deleted from its own menu, whose confirmation says the chats are kept:
the chat is back in the main list (renamed from the same menu first). On a phone's width the
folders are in the chats drawer."""

from __future__ import annotations

import pytest
from django.utils import timezone
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.folder_models import Folder
from chatapp.chat.models import Conversation
from tests.support.browser import console_errors
from tests.ui.test_browser import _menu_dialog, _sign_up, _wait
from tests.ui.test_browser_pin import _sections
from tests.ui.test_browser_sidebar_rename import _chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _folders(driver) -> list[tuple[str, list[str]]]:
    """(name, titles of the chats shown in it) of each folder in the sidebar, in order."""
    found = []
    for folder in driver.find_elements(By.CSS_SELECTOR, "#conv-nav .folder"):
        titles = [t.get_attribute("textContent") for t in folder.find_elements(By.CSS_SELECTOR, ".conv-title")]
        found.append((folder.find_element(By.CSS_SELECTOR, ".folder-name").text, titles))
    return found


def _type_name(browser, name: str) -> None:
    field = browser.find_element(By.ID, "folder-name-input")
    _wait(browser, lambda d: d.switch_to.active_element == field)
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(name, Keys.ENTER)


def test_a_folder_is_made_holds_a_chat_folds_and_its_delete_keeps_the_chat(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "folders")
    trip = _chat("folders", "Lisbon trip")
    _chat("folders", "Groceries")
    browser.get(f"{asgi_server.url}/c/{trip.pk}/")
    dialog = browser.find_element(By.ID, "folder-name-dialog")

    browser.execute_script("document.getElementById('new-folder').focus()")
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _wait(browser, lambda d: dialog.get_attribute("open") is not None)
    _type_name(browser, "Travel")
    _wait(browser, lambda d: _folders(d) == [("Travel", [])])
    _wait(browser, lambda d: dialog.get_attribute("open") is None)
    assert browser.switch_to.active_element.get_attribute("class") == "folder-toggle"

    # The same name in another case: said in the dialog, which stays open.
    browser.find_element(By.ID, "new-folder").click()
    _type_name(browser, "TRAVEL")
    _wait(browser, lambda d: "already have a folder" in d.find_element(By.ID, "folder-name-error").text)
    assert dialog.get_attribute("open") is not None
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    _wait(browser, lambda d: dialog.get_attribute("open") is None)
    assert Folder.objects.count() == 1
    # The refusal's 400, which the browser logs: the only error of the page.
    assert [
        "/api/folders/ - " in e["message"] and "400 (Bad Request)" in e["message"] for e in console_errors(browser)
    ] == [True]

    move = _menu_dialog(browser, "move-to-folder", "folder-move-dialog")
    labels = [c.text for c in move.find_elements(By.CSS_SELECTOR, ".folder-choice")]
    assert labels == ["No folder", "Travel"]
    assert browser.switch_to.active_element.get_attribute("value") == ""  # "No folder": where it is now
    ActionChains(browser).send_keys(Keys.ARROW_DOWN).perform()  # the radio group's own keys
    move.find_element(By.ID, "folder-move-save").click()
    _wait(browser, lambda d: _folders(d) == [("Travel", ["Lisbon trip"])])
    assert _sections(browser) == [("Today", ["Groceries"])]
    assert browser.switch_to.active_element.get_attribute("id") == "conv-menu-btn"
    folder = Folder.objects.get()
    assert Conversation.objects.get(pk=trip.pk).folder_id == folder.pk

    toggle = browser.find_element(By.CSS_SELECTOR, ".folder-toggle")
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "false"
    assert not browser.find_element(By.CSS_SELECTOR, ".folder-chats").is_displayed()
    browser.refresh()  # folded it stays, in this browser
    toggle = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".folder-toggle"))
    _wait(browser, lambda d: toggle.get_attribute("aria-expanded") == "false")
    assert not browser.find_element(By.CSS_SELECTOR, ".folder-chats").is_displayed()
    browser.execute_script("arguments[0].focus()", toggle)
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".folder-chats").is_displayed())
    assert toggle.get_attribute("aria-expanded") == "true"

    browser.find_element(By.CSS_SELECTOR, ".folder-menu-btn").click()
    browser.find_element(By.CSS_SELECTOR, '[data-action="rename-folder"]').click()
    dialog = browser.find_element(By.ID, "folder-name-dialog")  # the page was loaded again
    _wait(browser, lambda d: dialog.get_attribute("open") is not None)
    assert browser.find_element(By.ID, "folder-name-input").get_attribute("value") == "Travel"
    _type_name(browser, "Trips")
    _wait(browser, lambda d: _folders(d) == [("Trips", ["Lisbon trip"])])
    _wait(browser, lambda d: "folder-menu-btn" in d.switch_to.active_element.get_attribute("class"))
    assert Folder.objects.get().name == "Trips"

    browser.find_element(By.CSS_SELECTOR, ".folder-menu-btn").click()
    delete = browser.find_element(By.CSS_SELECTOR, '[data-action="delete-folder"]')
    _wait(browser, lambda d: d.switch_to.active_element.text == "Rename")  # the menu's first item
    ActionChains(browser).send_keys(Keys.ARROW_DOWN).perform()
    assert browser.switch_to.active_element == delete
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    confirm = browser.find_element(By.ID, "confirm-dialog")
    _wait(browser, lambda d: confirm.get_attribute("open") is not None)
    assert "Its chats are kept" in confirm.find_element(By.ID, "confirm-text").text
    confirm.find_element(By.ID, "confirm-ok").click()

    _wait(browser, lambda d: _folders(d) == [])
    _wait(browser, lambda d: _sections(d) == [("Today", ["Groceries", "Lisbon trip"])])
    assert browser.switch_to.active_element.get_attribute("id") == "new-folder"
    assert not Folder.objects.exists()
    assert Conversation.objects.get(pk=trip.pk).folder_id is None
    assert console_errors(browser) == []


def test_on_a_phone_the_folders_are_in_the_chats_drawer(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "folders-phone")
    trip = _chat("folders-phone", "Lisbon trip")
    owner = trip.owner
    Conversation.objects.filter(pk=trip.pk).update(folder=Folder.objects.create(owner=owner, name="Travel"))
    browser.set_window_size(390, 844)
    try:
        browser.get(f"{asgi_server.url}/c/{trip.pk}/")
        browser.find_element(By.CSS_SELECTOR, ".sidebar-toggle").click()
        toggle = browser.find_element(By.CSS_SELECTOR, ".folder-toggle")
        _wait(browser, lambda d: toggle.is_displayed())
        menu_button = browser.find_element(By.CSS_SELECTOR, ".folder-menu-btn")
        assert menu_button.is_displayed()
        right = browser.execute_script("return arguments[0].getBoundingClientRect().right", menu_button)
        assert right <= 390  # within the screen
        toggle.click()
        _wait(browser, lambda d: not d.find_element(By.CSS_SELECTOR, ".folder-chats").is_displayed())
        assert _folders(browser) == [("Travel", ["Lisbon trip"])]
        assert console_errors(browser) == []
    finally:
        browser.set_window_size(1280, 900)


def _fits(browser, element) -> bool:
    return browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth", element)


def test_a_long_name_without_spaces_wraps_in_the_dialogs(asgi_server, browser):
    """80 characters and no space (a pasted id, a name in a script without spaces): the clash said in
    the name dialog and the delete confirmation wrap within their dialog, not past its right edge."""
    _sign_up(browser, asgi_server.url, "folders-long")
    trip = _chat("folders-long", "Lisbon trip")
    Folder.objects.create(owner=trip.owner, name="W" * 80)
    browser.get(f"{asgi_server.url}/c/{trip.pk}/")

    browser.find_element(By.ID, "new-folder").click()
    _type_name(browser, "w" * 80)
    dialog = browser.find_element(By.ID, "folder-name-dialog")
    _wait(browser, lambda d: "already have a folder" in d.find_element(By.ID, "folder-name-error").text)
    assert _fits(browser, dialog)
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    _wait(browser, lambda d: dialog.get_attribute("open") is None)

    browser.find_element(By.CSS_SELECTOR, ".folder-menu-btn").click()
    browser.find_element(By.CSS_SELECTOR, '[data-action="delete-folder"]').click()
    confirm = browser.find_element(By.ID, "confirm-dialog")
    _wait(browser, lambda d: confirm.get_attribute("open") is not None)
    assert _fits(browser, confirm)


def test_move_to_folder_after_the_chats_folder_was_deleted_in_another_tab(asgi_server, browser):
    """The sidebar still shows the chat in a folder deleted meanwhile (another tab): the dialog, which
    lists the folders as they are now, has the chat in none, so Enter there is not a silent no-op."""
    _sign_up(browser, asgi_server.url, "folders-gone")
    trip = _chat("folders-gone", "Lisbon trip")
    gone = Folder.objects.create(owner=trip.owner, name="Travel")
    Folder.objects.create(owner=trip.owner, name="Work")
    Conversation.objects.filter(pk=trip.pk).update(folder=gone)
    browser.get(f"{asgi_server.url}/c/{trip.pk}/")
    gone.delete()  # in another tab

    move = _menu_dialog(browser, "move-to-folder", "folder-move-dialog")
    assert [c.text for c in move.find_elements(By.CSS_SELECTOR, ".folder-choice")] == ["No folder", "Work"]
    checked = move.find_elements(By.CSS_SELECTOR, "input:checked")
    assert [c.get_attribute("value") for c in checked] == [""]
    assert browser.switch_to.active_element == checked[0]
    ActionChains(browser).send_keys(Keys.ARROW_DOWN, Keys.ENTER).perform()
    _wait(browser, lambda d: _folders(d) == [("Work", ["Lisbon trip"])])
    assert move.get_attribute("open") is None


def test_the_toast_of_a_move_wraps_a_long_folder_name_on_a_phone(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "folders-toast")
    trip = _chat("folders-toast", "Lisbon trip")
    Folder.objects.create(owner=trip.owner, name="Z" * 80)
    browser.set_window_size(390, 844)
    try:
        browser.get(f"{asgi_server.url}/c/{trip.pk}/")
        move = _menu_dialog(browser, "move-to-folder", "folder-move-dialog")
        move.find_elements(By.CSS_SELECTOR, ".folder-choice input")[-1].click()
        move.find_element(By.ID, "folder-move-save").click()
        said = _wait(browser, lambda d: [t for t in d.find_elements(By.CSS_SELECTOR, ".toast") if "moved" in t.text])
        assert _fits(browser, said[0])
    finally:
        browser.set_window_size(1280, 900)


def test_renaming_a_folder_deleted_in_another_tab_says_so_and_drops_it_from_the_list(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "folders-renamed-gone")
    trip = _chat("folders-renamed-gone", "Lisbon trip")
    gone = Folder.objects.create(owner=trip.owner, name="Travel")
    Folder.objects.create(owner=trip.owner, name="Work")
    browser.get(f"{asgi_server.url}/c/{trip.pk}/")
    Folder.objects.filter(pk=gone.pk).delete()  # in another tab

    browser.find_element(By.CSS_SELECTOR, f'.folder[data-folder-id="{gone.pk}"] .folder-menu-btn').click()
    browser.find_element(By.CSS_SELECTOR, f'#folder-menu-{gone.pk} [data-action="rename-folder"]').click()
    _type_name(browser, "Trips")
    _wait(browser, lambda d: "no longer exists" in d.find_element(By.ID, "folder-name-error").text)
    _wait(browser, lambda d: _folders(d) == [("Work", [])])  # the list as it is now
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    _wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "new-folder")


def test_the_chat_shown_moved_into_a_folded_folder_opens_it(asgi_server, browser):
    """Moved into a folder folded in this browser, the chat shown had no row to be seen in the sidebar
    (its folder stayed folded): the folder it went to is opened, and stays open."""
    _sign_up(browser, asgi_server.url, "folded-move")
    trip = _chat("folded-move", "Lisbon trip")
    porto = _chat("folded-move", "Porto trip")
    Conversation.objects.filter(pk=porto.pk).update(folder=Folder.objects.create(owner=trip.owner, name="Travel"))
    browser.get(f"{asgi_server.url}/c/{trip.pk}/")
    toggle = browser.find_element(By.CSS_SELECTOR, ".folder-toggle")
    toggle.click()
    _wait(browser, lambda d: not d.find_element(By.CSS_SELECTOR, ".folder-chats").is_displayed())

    move = _menu_dialog(browser, "move-to-folder", "folder-move-dialog")
    ActionChains(browser).send_keys(Keys.ARROW_DOWN).perform()
    move.find_element(By.ID, "folder-move-save").click()

    _wait(browser, lambda d: _folders(d) == [("Travel", ["Porto trip", "Lisbon trip"])])
    row = browser.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{trip.pk}"]')
    _wait(browser, lambda d: row.is_displayed())
    assert browser.find_element(By.CSS_SELECTOR, ".folder-toggle").get_attribute("aria-expanded") == "true"
    browser.refresh()
    _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{trip.pk}"]').is_displayed())
    assert console_errors(browser) == []


def test_a_folder_made_while_a_search_is_typed_is_shown(asgi_server, browser):
    # A search lists its matches only, no folders: a folder made then was not in the list, and the
    # user, told "made" but shown nothing, took it for a failure. The search is cleared to show it.
    _sign_up(browser, asgi_server.url, "folders-search")
    trip = _chat("folders-search", "Lisbon trip")
    _chat("folders-search", "Groceries")
    browser.get(f"{asgi_server.url}/c/{trip.pk}/")
    browser.find_element(By.ID, "chat-search").send_keys("Lisbon")
    _wait(browser, lambda d: "match" in d.find_element(By.ID, "search-status").get_attribute("textContent"))

    browser.find_element(By.ID, "new-folder").click()
    _type_name(browser, "Travel")
    dialog = browser.find_element(By.ID, "folder-name-dialog")
    _wait(browser, lambda d: dialog.get_attribute("open") is None)
    assert _folders(browser) == [("Travel", [])]
    assert browser.find_element(By.ID, "chat-search").get_attribute("value") == ""
    assert [(name, sorted(titles)) for name, titles in _sections(browser)] == [("Today", ["Groceries", "Lisbon trip"])]
    assert browser.switch_to.active_element == browser.find_element(By.CSS_SELECTOR, ".folder-toggle")
    said = browser.find_element(By.ID, "stream-status").get_attribute("textContent")
    assert said == "Folder “Travel” made; the search was cleared to show it."
    assert console_errors(browser) == []


def _counts(browser) -> list[tuple[str, str, str]]:
    """(name, count said, the folder's note when it lists none) of each folder in the sidebar."""
    return [(f.find_element(By.CSS_SELECTOR, ".folder-name").text,
             f.find_element(By.CSS_SELECTOR, ".folder-count").get_attribute("textContent"),
             " ".join(e.text for e in f.find_elements(By.CSS_SELECTOR, ".folder-empty")))
            for f in browser.find_elements(By.CSS_SELECTOR, "#conv-nav .folder")]


def test_deleting_a_folders_chats_from_the_keyboard_recounts_it_and_keeps_the_focus_in_sight(asgi_server, browser):
    # The row went and the folder still said "3 chats" (its pinned one counted, listed under Pinned; then
    # "3 chats" over nothing) until a reload; the last chat listed deleted, the focus went to the one
    # above it, in a folded folder: to the page.
    from tests.ui.test_browser_focus_kept import _confirm, _tab_to_delete

    _sign_up(browser, asgi_server.url, "folders-delete")
    home = Folder.objects.create(owner=_chat("folders-delete", "Garden").owner, name="Home")
    work = Folder.objects.create(owner=home.owner, name="Work")
    Conversation.objects.filter(title="Garden").update(folder=home)
    for title in ("Report", "Budget", "Plan"):
        Conversation.objects.filter(pk=_chat("folders-delete", title).pk).update(folder=work)
    Conversation.objects.filter(title="Plan").update(pinned_at=timezone.now())  # listed under Pinned
    browser.get(f"{asgi_server.url}/c/new/")
    browser.find_element(By.CSS_SELECTOR, f'.folder[data-folder-id="{home.pk}"] .folder-toggle').click()
    assert _counts(browser) == [("Home", "1 chat", ""), ("Work", "3 chats", "")]

    for title, counts in (("Plan", [("Home", "1 chat", ""), ("Work", "2 chats", "")]),
                          ("Report", [("Home", "1 chat", ""), ("Work", "1 chat", "")]),
                          ("Budget", [("Home", "1 chat", ""), ("Work", "0 chats", "No chats in this folder.")])):
        row = browser.find_element(By.XPATH, f'//li[contains(@class, "conv-item")][.//*[text()="{title}"]]')
        _tab_to_delete(browser, row)
        ActionChains(browser).send_keys(Keys.ENTER).perform()
        _confirm(browser, "confirm-ok").send_keys(Keys.ENTER)
        _wait(browser, lambda d, want=counts: _counts(d) == want)
        focused = browser.switch_to.active_element
        assert focused.tag_name != "body" and focused.is_displayed()
    assert console_errors(browser) == []


def test_a_chat_unpinned_into_a_folded_folder_leaves_the_focus_on_that_folder(asgi_server, browser):
    # Unpinned, the chat goes back into its folder, folded: its Pin button, where the focus was to stay,
    # is not shown, and the focus fell to the page.
    from tests.ui.test_browser_pin import _press_pin

    _sign_up(browser, asgi_server.url, "folders-unpin")
    plan = _chat("folders-unpin", "Plan")
    work = Folder.objects.create(owner=plan.owner, name="Work")
    Conversation.objects.filter(pk=plan.pk).update(folder=work, pinned_at=timezone.now())
    _chat("folders-unpin", "Groceries")
    browser.get(f"{asgi_server.url}/c/new/")
    toggle = browser.find_element(By.CSS_SELECTOR, ".folder-toggle")
    toggle.click()
    _wait(browser, lambda d: toggle.get_attribute("aria-expanded") == "false")

    _press_pin(browser, plan)

    _wait(browser, lambda d: [s for s, _ in _sections(d)] == ["Today"])
    assert browser.switch_to.active_element == browser.find_element(By.CSS_SELECTOR, ".folder-toggle")
    assert console_errors(browser) == []
