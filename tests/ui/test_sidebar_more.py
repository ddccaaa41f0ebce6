"""The sidebar reaches every chat: past its first page, "Show older chats" lists the next ones."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.models import Conversation
from chatapp.chat.views import SIDEBAR_LIMIT
from tests.ui.test_browser import _sign_up, _wait

pytestmark = pytest.mark.django_db


def _many_chats(owner, count: int) -> None:
    """`count` chats, "Chat 000" the least recently active."""
    now = timezone.now()
    Conversation.objects.bulk_create([Conversation(owner=owner, title=f"Chat {i:03d}") for i in range(count)])
    for i, pk in enumerate(Conversation.objects.filter(owner=owner).order_by("id").values_list("pk", flat=True)):
        Conversation.objects.filter(pk=pk).update(updated_at=now - timedelta(days=count - i))


def _signed_up_with_pages_of(limit: int, *, monkeypatch, browser, url: str, username: str):
    """A new account signed in in `browser`, its sidebar listing `limit` chats a page; the user."""
    from chatapp.chat import sidebar, views

    monkeypatch.setattr(sidebar, "SIDEBAR_LIMIT", limit)
    monkeypatch.setattr(views, "SIDEBAR_LIMIT", limit)
    _sign_up(browser, url, username)
    return get_user_model().objects.get(username=username)


def _listed(body: str) -> list[str]:
    return re.findall(r'class="conv-item[^"]*" data-id="(\d+)"', body)


def test_chats_past_the_first_page_are_one_press_away(page, user):
    _many_chats(user, SIDEBAR_LIMIT + 5)
    oldest = str(Conversation.objects.get(owner=user, title="Chat 000").pk)

    first = page.get("/c/sidebar/").content.decode()
    # 200 listed, and nothing led to the other five
    assert len(_listed(first)) == SIDEBAR_LIMIT and oldest not in _listed(first)
    more = re.search(r'data-action="more-chats" data-limit="(\d+)"', first)
    assert more is not None and 'data-action="more-chats"' in page.get("/c/new/").content.decode()

    everything = page.get(f"/c/sidebar/?limit={more.group(1)}").content.decode()
    assert len(_listed(everything)) == SIDEBAR_LIMIT + 5 and oldest in _listed(everything)
    assert "more-chats" not in everything  # all listed: no button


@pytest.mark.parametrize("limit", ["abc", "-5", "99999999999", "5"])
def test_an_odd_limit_lists_the_first_page(page, user, limit):
    Conversation.objects.create(owner=user, title="Only one")
    response = page.get(f"/c/sidebar/?limit={limit}")
    assert response.status_code == 200 and len(_listed(response.content.decode())) == 1


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_show_older_chats_in_the_browser_lists_them_and_focuses_the_first(asgi_server, browser):
    _sign_up(browser, asgi_server.url, "many-chats")
    owner = get_user_model().objects.get(username="many-chats")
    _many_chats(owner, SIDEBAR_LIMIT + 3)
    browser.get(f"{asgi_server.url}/c/new/")
    button = browser.find_element(By.CSS_SELECTOR, '[data-action="more-chats"]')
    browser.execute_script("arguments[0].scrollIntoView()", button)
    button.click()

    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".conv-item")) == SIDEBAR_LIMIT + 3)
    assert browser.switch_to.active_element.text == "Chat 002"  # the first chat just listed
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-action="more-chats"]')


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_show_older_chats_focuses_the_first_chat_it_added_to_a_long_folder(asgi_server, browser, monkeypatch):
    # A folder's chats come before those in no folder: the focus went to the chat at the place the button
    # had counted, here one listed before the press, however many the folder gained above it.
    from chatapp.chat.folder_services import conversation_folder_set, folder_create

    owner = _signed_up_with_pages_of(3, monkeypatch=monkeypatch, browser=browser, url=asgi_server.url,
                                     username="long-folder")
    work = folder_create(owner=owner, name="Work")
    now = timezone.now()
    for i in range(5):
        chat = Conversation.objects.create(owner=owner, title=f"Work {i}")
        conversation_folder_set(conversation=chat, folder=work)
        Conversation.objects.filter(pk=chat.pk).update(updated_at=now - timedelta(days=i))
    for i in range(2):
        chat = Conversation.objects.create(owner=owner, title=f"Loose {i}")
        Conversation.objects.filter(pk=chat.pk).update(updated_at=now - timedelta(days=10 + i))
    browser.get(f"{asgi_server.url}/c/new/")
    assert [t.get_attribute("textContent") for t in browser.find_elements(By.CSS_SELECTOR, ".conv-title")] == [
        "Work 0", "Work 1", "Work 2", "Loose 0", "Loose 1"]
    button = browser.find_element(By.CSS_SELECTOR, '[data-action="more-chats"]')
    browser.execute_script("arguments[0].focus()", button)
    button.send_keys(Keys.ENTER)

    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".conv-item")) == 7)
    assert browser.switch_to.active_element.text == "Work 3"  # the first chat just listed


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_show_older_chats_offline_says_so_and_works_again_once_back(asgi_server, browser, monkeypatch):
    # The list could not be fetched: the button stayed disabled for good, and nothing said why.
    _many_chats(_signed_up_with_pages_of(2, monkeypatch=monkeypatch, browser=browser, url=asgi_server.url,
                                         username="older-offline"), 3)
    browser.get(f"{asgi_server.url}/c/new/")
    button = browser.find_element(By.CSS_SELECTOR, '[data-action="more-chats"]')
    browser.execute_script("arguments[0].scrollIntoView()", button)
    browser.set_network_conditions(offline=True, latency=0, download_throughput=-1, upload_throughput=-1)
    button.click()

    toast = _wait(browser, lambda d: [t for t in d.find_elements(By.CSS_SELECTOR, ".toast")
                                      if "Could not list older chats" in t.text])
    assert toast and button.is_enabled() and len(browser.find_elements(By.CSS_SELECTOR, ".conv-item")) == 2
    browser.delete_network_conditions()
    button.click()
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".conv-item")) == 3)
