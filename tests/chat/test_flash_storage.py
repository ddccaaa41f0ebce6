"""Flash messages are built only when a request uses them, and still reach the next page once."""

from __future__ import annotations

import pytest
from django.contrib import messages
from django.contrib.auth.models import User
from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import RequestFactory

from chatapp.chat.flash_storage import LazyFallbackStorage
from tests.support.accounts import api_key_for

pytestmark = pytest.mark.django_db

SAVED = "Preferences saved. They apply to your next message."


def test_a_flash_message_reaches_the_next_page_once(client):
    user = User.objects.create_user(username="flash", password="pw-flash-1")
    client.force_login(user)

    saved = client.post("/settings/", {"preference": "quality", "auto_optimize": "on"})
    assert saved.status_code == 302
    first = client.get(saved["Location"]).content.decode()
    again = client.get("/settings/").content.decode()

    assert SAVED in first
    assert SAVED not in again


def test_an_api_call_builds_no_message_storage_and_sets_no_cookie(client, monkeypatch):
    built = []
    real = FallbackStorage.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(FallbackStorage, "__init__", counting)
    user = User.objects.create_user(username="api-flash", password="pw-flash-2")
    token = api_key_for(user)

    response = client.get("/api/conversations/", HTTP_AUTHORIZATION=f"Token {token}")

    assert response.status_code == 200
    assert built == []
    assert "messages" not in response.cookies


def test_the_lazy_storage_behaves_as_the_storage_it_stands_for():
    request = RequestFactory().get("/")
    request.session = {}
    storage = LazyFallbackStorage(request)
    request._messages = storage

    assert len(storage) == 0 and list(storage) == []
    messages.set_level(request, messages.DEBUG)
    messages.debug(request, "seen at the debug level")
    assert storage.level == messages.DEBUG
    assert [m.message for m in storage] == ["seen at the debug level"]
    assert "seen at the debug level" in [m.message for m in storage]
