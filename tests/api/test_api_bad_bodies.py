"""Bad bodies get clear JSON answers, never an HTML 500 (issue 11, finding 7): deep nesting is a
400, an oversized body a 413, on every JSON write endpoint and the unauthenticated token endpoint."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from chatapp.chat.models import Conversation

pytestmark = pytest.mark.django_db

NESTED = "[" * 100_000 + "]" * 100_000


def _paths(conversation: Conversation) -> list[str]:
    return [
        "/api/conversations/",
        f"/api/conversations/{conversation.pk}/messages/",
        "/api/configs/",
    ]


def test_deep_nesting_is_a_json_400(api, user):
    conversation = Conversation.objects.create(owner=user)
    for path in _paths(conversation):
        response = api.post(path, data=NESTED, content_type="application/json")
        assert response.status_code == 400, path
        assert response["Content-Type"].startswith("application/json"), path
        assert "nested too deeply" in json.dumps(response.json())
    anonymous = APIClient().post("/api/auth/token/", data=NESTED, content_type="application/json")
    assert anonymous.status_code == 400 and "nested too deeply" in json.dumps(anonymous.json())


def test_an_oversized_body_is_a_json_413_and_a_long_message_its_own_413(api, user, settings):
    conversation = Conversation.objects.create(owner=user)
    path = f"/api/conversations/{conversation.pk}/messages/"
    huge = api.post(path, data=json.dumps({"content": "x" * 10_000_000}), content_type="application/json")
    assert huge.status_code == 413 and huge["Content-Type"].startswith("application/json")
    assert "larger than" in huge.json()["detail"]
    long = api.post(path, data=json.dumps({"content": "x" * (settings.MAX_MESSAGE_CHARS + 1)}),
                    content_type="application/json")
    assert long.status_code == 413 and "characters" in json.dumps(long.json())
    anonymous = APIClient().post("/api/auth/token/", data=json.dumps({"username": "x" * 10_000_000}),
                                 content_type="application/json")
    assert anonymous.status_code == 413
