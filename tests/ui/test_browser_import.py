"""Settings → Import and export in a real browser: choose a file, watch the progress bar, follow
the links to the imported chats; a foreign file shows the reason. The job runs in the server's
process at publish time (as a worker would run it; tests/worker runs a real one)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.import_models import ImportJob
from chatapp.chat.import_services import import_job_run
from chatapp.chat.models import Conversation
from chatapp.chat.tasks import import_conversations
from tests.chat.importkit import FILES
from tests.support.browser import console_errors, in_accessibility_tree
from tests.ui.test_browser import _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def inline_worker(monkeypatch):
    def apply_async(*, args, **kwargs):
        import_job_run(job_id=args[0])

    monkeypatch.setattr(import_conversations, "apply_async", apply_async)


def _import(browser, path) -> None:
    browser.find_element(By.ID, "import-file").send_keys(str(path))
    browser.find_element(By.ID, "import-start").click()


def test_import_shows_progress_then_links_and_errors(asgi_server, browser, inline_worker, tmp_path):
    base = asgi_server.url
    _sign_up(browser, base, "browser-importer")
    browser.get(f"{base}/settings/")
    label = browser.find_element(By.CSS_SELECTOR, "label[for=import-file]")
    assert label.text == "File to import"

    _import(browser, FILES / "openwebui_branch.json")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#import-links a"))
    bar = browser.find_element(By.ID, "import-progress")
    assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("2", "2")
    assert browser.find_element(By.ID, "import-progress-label").text == "Imported 2 conversations"
    message = browser.find_element(By.ID, "import-message").text
    assert message.startswith("2 of 2 conversations imported.")  # branches are imported: nothing left out
    links = browser.find_elements(By.CSS_SELECTOR, "#import-links a")
    owner = get_user_model().objects.get(username="browser-importer")
    ids = list(Conversation.objects.filter(owner=owner).order_by("id").values_list("id", flat=True))
    assert [(a.text, a.get_attribute("href")) for a in links] == [
        ("Tomato seedlings", f"{base}/c/{ids[0]}/"), ("Haiku about rain", f"{base}/c/{ids[1]}/")]

    # the same file again: its chats are here already, and said so in the colours of a success
    _import(browser, FILES / "openwebui_branch.json")
    _wait(browser, lambda d: "imported before" in d.find_element(By.ID, "import-message").text)
    assert browser.find_element(By.ID, "import-message").text == (
        "0 of 2 conversations imported. 2 were imported before and are left as they are.")
    assert "is-ok" in browser.find_element(By.ID, "import-message").get_attribute("class")
    assert browser.find_element(By.ID, "import-progress-label").text == "Nothing new to import"
    assert Conversation.objects.filter(owner=owner).count() == 2

    # what a source had that is not stored is said (ChatGPT's tool call and hidden context message)
    _import(browser, FILES / "chatgpt_branch.json")
    _wait(browser, lambda d: "Sourdough schedule" in d.find_element(By.ID, "import-links").text)
    message = browser.find_element(By.ID, "import-message").text
    assert "1 from tools" in message and "1 hidden by the source" in message

    # done, but every conversation skipped: said as a failure, not in the colours of a success
    every_one_bad = json.loads((FILES / "openwebui_branch.json").read_text())
    for chat in (c["chat"] for c in every_one_bad):  # a message tree, or a plain list
        for message in [*chat.get("history", {}).get("messages", {}).values(), *chat.get("messages", [])]:
            message["role"] = "wizard"
    bad_file = tmp_path / "all_skipped.json"
    bad_file.write_text(json.dumps(every_one_bad))
    _import(browser, bad_file)
    _wait(browser, lambda d: "0 of 2 conversations imported" in d.find_element(By.ID, "import-message").text)
    assert "is-fail" in browser.find_element(By.ID, "import-message").get_attribute("class")

    empty = tmp_path / "empty.json"
    empty.write_text("")
    _import(browser, empty)
    _wait(browser, lambda d: "empty" in d.find_element(By.ID, "import-message").text)
    assert not browser.find_element(By.ID, "import-message").text.startswith("file:")
    # the refused upload is the log's one error (the browser logs every 400)
    assert ["400 (Bad Request)" in e["message"] for e in console_errors(browser)] == [True]

    _import(browser, FILES / "foreign.json")
    _wait(browser, lambda d: "not a known export" in d.find_element(By.ID, "import-message").text)
    assert browser.find_element(By.ID, "import-progress-label").text == "The import stopped"
    assert not browser.find_elements(By.CSS_SELECTOR, "#import-links a")
    assert console_errors(browser) == []


def test_a_job_that_is_gone_stops_the_progress_instead_of_polling_forever(asgi_server, browser, monkeypatch):
    # No worker: the job stays queued; then it is deleted (its user's other tab, an admin), a 404.
    monkeypatch.setattr(import_conversations, "apply_async", lambda **kwargs: None)
    base = asgi_server.url
    _sign_up(browser, base, "browser-import-gone")
    browser.get(f"{base}/settings/")
    _import(browser, FILES / "openwebui_branch.json")
    _wait(browser, lambda d: d.find_element(By.ID, "import-progress-label").text == "Waiting for a worker…")
    ImportJob.objects.filter(owner__username="browser-import-gone").delete()

    # it said "… Retrying…" every three seconds, for ever
    _wait(browser, lambda d: d.find_element(By.ID, "import-progress-label").text == "The import stopped")
    message = browser.find_element(By.ID, "import-message").text
    assert message and "Retrying" not in message


def test_import_started_from_the_keyboard_keeps_the_focus_on_its_button(asgi_server, browser, inline_worker):
    _sign_up(browser, asgi_server.url, "keyboard-importer")
    browser.get(f"{asgi_server.url}/settings/")
    browser.find_element(By.ID, "import-file").send_keys(str(FILES / "openwebui_branch.json"))
    start = browser.find_element(By.ID, "import-start")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'}); arguments[0].focus()", start)
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#import-links a")
          and not start.get_attribute("disabled"))
    assert browser.switch_to.active_element == start  # disabled meanwhile, it had dropped the focus to the page


def test_chats_that_came_in_archived_are_marked_and_said_to_be_out_of_the_sidebar(
        asgi_server, browser, inline_worker, tmp_path):
    # Chats archived at their source come in archived: out of the sidebar. The report listed them as the
    # others, and said nothing of where they went.
    def webui(title: str, **extra: object) -> dict:
        messages = {"u1": {"id": "u1", "parentId": None, "childrenIds": [], "role": "user", "content": title,
                           "timestamp": 1720000010}}
        return {"id": f"id-{title}", "title": title, "created_at": 1720000000, "updated_at": 1720000020,
                "chat": {"title": title, "history": {"messages": messages, "currentId": "u1"}}, **extra}

    upload = tmp_path / "webui.json"
    upload.write_text(json.dumps([webui("Old taxes", archived=True), webui("Garden", archived=False)]))
    _sign_up(browser, asgi_server.url, "archive-importer")
    browser.get(f"{asgi_server.url}/settings/")

    _import(browser, upload)

    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#import-links a"))
    message = browser.find_element(By.ID, "import-message").text
    assert message.startswith("2 of 2 conversations imported. 1 came in archived: out of the sidebar, "
                              "Settings → Archived chats lists it.")
    items = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#import-links li")]
    assert items == ["Old taxes Archived", "Garden"]
    assert console_errors(browser) == []


def test_import_pressed_without_a_file_does_not_say_importing(asgi_server, browser, inline_worker):
    # The box read "Importing…" over an empty bar beside "Choose a file to import first."; after an
    # import, "Imported 2 conversations" over a full bar, with no link left under it.
    _sign_up(browser, asgi_server.url, "fileless-importer")
    browser.get(f"{asgi_server.url}/settings/")
    browser.find_element(By.ID, "import-start").click()
    _wait(browser, lambda d: d.find_element(By.ID, "import-message").text == "Choose a file to import first.")
    assert browser.find_element(By.ID, "import-progress-label").text == "Not imported"

    _import(browser, FILES / "openwebui_branch.json")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#import-links a"))
    browser.execute_script("document.getElementById('import-file').value = ''")  # the choice cleared
    browser.find_element(By.ID, "import-start").click()
    _wait(browser, lambda d: d.find_element(By.ID, "import-message").text == "Choose a file to import first.")
    assert browser.find_element(By.ID, "import-progress-label").text == "Not imported"
    assert browser.find_element(By.ID, "import-progress").get_attribute("value") == "0"


def test_chats_imported_show_in_the_sidebar_of_the_other_tabs(asgi_server, browser, inline_worker):
    # The import's chats were listed in the other tabs' sidebars only at their next redraw or reload
    # (an import is no change of common.js's api() to tell them, README "Tabs in step").
    _sign_up(browser, asgi_server.url, "tabs-importer")
    chat_tab = browser.current_window_handle
    browser.get(f"{asgi_server.url}/c/new/")
    browser.switch_to.new_window("tab")
    try:
        browser.get(f"{asgi_server.url}/settings/")
        _import(browser, FILES / "openwebui_branch.json")
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#import-links a"))
        browser.switch_to.window(chat_tab)
        titles = "return [...document.querySelectorAll('#conv-nav .conv-title')].map((t) => t.textContent)"
        _wait(browser, lambda d: "Tomato seedlings" in d.execute_script(titles), timeout=10)
        assert console_errors(browser) == []
    finally:
        for handle in browser.window_handles:
            if handle != chat_tab:
                browser.switch_to.window(handle)
                browser.close()
        browser.switch_to.window(chat_tab)


def test_import_pressed_without_a_file_is_said(asgi_server, browser):
    # The reason was written into a live region that was not drawn until then (in the hidden box, and
    # display: none while empty): a live region created with its words in it is not read out, so
    # pressing Import without a file said nothing to a screen reader.
    _sign_up(browser, asgi_server.url, "import-nofile")
    browser.get(f"{asgi_server.url}/settings/")
    assert in_accessibility_tree(browser, "#import-message")  # there, silent, from the start
    browser.find_element(By.ID, "import-start").click()
    _wait(browser, lambda d: d.find_element(By.ID, "import-message").text == "Choose a file to import first.")
    assert browser.find_element(By.ID, "import-progress-label").text == "Not imported"
    assert browser.find_element(By.ID, "import-status").is_displayed()
    assert console_errors(browser) == []
