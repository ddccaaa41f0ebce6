"""A new chat named by the model, in a real browser: after the first reply the header, the tab and the
sidebar change from the first words to the title a worker stored (title_services, title_follow.js), and
the next reply's end does not put the first words back."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.celery import app as celery_app
from chatapp.chat import title_services
from chatapp.chat.models import Conversation, UserSettings
from chatapp.providers.models import LLMConfig
from tests.ui.test_browser import _idle, _send, _sign_up, _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _titling_user(browser, asgi_server, fake_openai, monkeypatch, titles_requested, *, username, model):
    """A user signed up on a new chat's page, chatting with `model`, whose titles `fake-title` writes in a
    worker's run in the web process (the request published and run at once: Celery's eager mode)."""
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    monkeypatch.setattr(title_services, "_title_publish", titles_requested.publish)
    user, _ = _sign_up_with_model(browser, asgi_server.url, username, fake_url=fake_openai.base_url,
                                  model=model, name="Echo")
    titler = LLMConfig.objects.create(owner=user, name="Titler", base_url=fake_openai.base_url, model="fake-title",
                                      context_window=16_000, max_output_tokens=500)
    UserSettings.objects.update_or_create(user=user, defaults={"summary_config": titler})
    browser.get(f"{asgi_server.url}/")
    return user


def test_the_first_reply_is_followed_by_the_models_title(asgi_server, browser, fake_openai, monkeypatch,
                                                          titles_requested):
    user = _titling_user(browser, asgi_server, fake_openai, monkeypatch, titles_requested,
                         username="titled-chat", model="fake-echo")

    _send(browser, "rotate the nginx logs every night, please")

    header = browser.find_element(By.ID, "chat-title")
    _wait(browser, lambda d: header.text == "Rotate the nginx")  # fake-title's three words, capitalised
    assert browser.title.startswith("Rotate the nginx")
    conversation = Conversation.objects.get(owner=user)
    item = browser.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{conversation.pk}"] .conv-title')
    assert item.text == "Rotate the nginx"
    assert conversation.title == "Rotate the nginx" and not conversation.title_is_custom


def test_a_title_given_while_the_next_reply_streams_is_not_undone_by_its_end(asgi_server, browser, fake_openai):
    user, _ = _sign_up_with_model(browser, asgi_server.url, "late-title", fake_url=fake_openai.base_url,
                                  model="slow-400", name="Slow echo")
    browser.get(f"{asgi_server.url}/")
    _send(browser, "rotate the nginx logs every night, please")
    header = browser.find_element(By.ID, "chat-title")
    first_words = header.text
    conversation = Conversation.objects.get(owner=user)

    _wait(browser, _idle)
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys("and weekly?", Keys.ENTER)
    replies = lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")  # noqa: E731
    _wait(browser, lambda d: len(replies(d)) == 2 and "Echo" in replies(d)[-1].text)  # the second one streams
    # the worker's conditional update, as it lands while that reply is written (its turn read the first words)
    assert Conversation.objects.filter(pk=conversation.pk, title=first_words).update(title="Nginx log rotation")
    _wait(browser, lambda d: header.text == "Nginx log rotation")  # followed since the first reply's end
    _wait(browser, lambda d: replies(d)[-1].get_attribute("data-status") == "complete", timeout=60)

    # its `done` still says the first words: they are not news, and do not come back
    assert header.text == "Nginx log rotation" and browser.title.startswith("Nginx log rotation")
    item = browser.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{conversation.pk}"] .conv-title')
    assert item.text == "Nginx log rotation"


def test_a_page_reloaded_while_the_first_reply_streams_shows_the_models_title(asgi_server, browser, fake_openai,
                                                                              monkeypatch, titles_requested):
    # The reloaded page never sees the turn's `done` (it went to the page that left): it follows the reply
    # to its end, then asks the conversation, which says the title is coming (or has come).
    user = _titling_user(browser, asgi_server, fake_openai, monkeypatch, titles_requested,
                         username="reloaded-title", model="slow-500")
    _wait(browser, _idle)
    browser.find_element(By.ID, "composer-input").send_keys("rotate the nginx logs every night, please", Keys.ENTER)
    _wait(browser, lambda d: "Echo" in d.find_element(By.CSS_SELECTOR, ".msg--assistant").text)  # it streams

    browser.refresh()

    conversation = Conversation.objects.get(owner=user)
    reply = browser.find_element(By.CSS_SELECTOR, ".msg--assistant")
    assert reply.get_attribute("data-status") == "streaming"  # followed from the server, not streamed here
    header = browser.find_element(By.ID, "chat-title")
    _wait(browser, lambda d: header.text == "Rotate the nginx", timeout=60)
    assert browser.title.startswith("Rotate the nginx")
    item = browser.find_element(By.CSS_SELECTOR, f'.conv-item[data-id="{conversation.pk}"] .conv-title')
    assert item.text == "Rotate the nginx"


def test_a_page_opened_while_the_title_is_coming_shows_it(asgi_server, browser):
    # Another tab's first reply has just ended; this page opens the chat before the worker answers.
    _sign_up(browser, asgi_server.url, "opened-title")
    conversation = Conversation.objects.create(owner=get_user_model().objects.get(username="opened-title"),
                                               title="rotate the nginx")
    cache.set(title_services._pending_key(conversation.pk), "rotate the nginx", 60)
    browser.get(f"{asgi_server.url}/c/{conversation.pk}/")
    header = browser.find_element(By.ID, "chat-title")
    assert header.text == "rotate the nginx"

    Conversation.objects.filter(pk=conversation.pk).update(title="Nginx log rotation")  # the worker's answer

    _wait(browser, lambda d: header.text == "Nginx log rotation", timeout=15)
