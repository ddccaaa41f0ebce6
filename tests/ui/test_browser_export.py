"""Export downloads in a real browser (issue 13): the chat header's menu saves the conversation as our
JSON and as Markdown files, streamed by the server and written by Chromium, with the active path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from chatapp.chat.models import Conversation
from tests.support.browser import console_errors
from tests.ui.test_browser import _send, _sign_up, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _downloaded(folder: Path, suffix: str) -> Path | None:
    # Chromium writes `<name>.crdownload` and renames it when the download is complete
    done = [p for p in folder.iterdir() if p.suffix == suffix]
    return done[0] if done else None


def _download(browser, folder: Path, fmt: str, suffix: str) -> str:
    """Open the header menu, click the export link of `fmt`, and read the file Chromium saved."""
    browser.find_element(By.ID, "conv-menu-btn").click()
    _wait(browser, lambda d: d.find_element(By.ID, "conv-menu").is_displayed())
    browser.find_element(By.CSS_SELECTOR, f"#conv-menu a[download][href$='format={fmt}']").click()
    return _wait(browser, lambda d: _downloaded(folder, suffix)).read_text(encoding="utf-8")


def test_export_menu_downloads_json_and_markdown(asgi_server, browser, tmp_path):
    base = asgi_server.url
    _sign_up(browser, base, "browser-exporter")
    _send(browser, "Plan a three-day trip to Lisbon with one museum a day.")
    conversation = Conversation.objects.get(owner=get_user_model().objects.get(username="browser-exporter"))
    browser.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)})

    document = json.loads(_download(browser, tmp_path, "json", ".json"))
    assert document["format"] == "longchat.conversation"
    assert document["conversation"]["title"] == conversation.title
    contents = [m["content"] for m in document["messages"]]
    assert len(contents) == 2 and contents[0] == "Plan a three-day trip to Lisbon with one museum a day."

    markdown = _download(browser, tmp_path, "markdown", ".md")
    assert markdown.startswith(f"# {conversation.title}")
    assert "Plan a three-day trip to Lisbon with one museum a day." in markdown
    assert console_errors(browser) == []
