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
    settings.SEND_MAX_BODY_BYTES = 5_000_000  # a send takes more than other bodies (its images)
    huge = api.post(path, data=json.dumps({"content": "x" * 10_000_000}), content_type="application/json")
    assert huge.status_code == 413 and huge["Content-Type"].startswith("application/json")
    assert huge.json() == {"detail": "The request body is larger than 5,000,000 bytes.", "limit": 5_000_000}
    long = api.post(path, data=json.dumps({"content": "x" * (settings.MAX_MESSAGE_CHARS + 1)}),
                    content_type="application/json")
    assert long.status_code == 413 and "characters" in json.dumps(long.json())
    anonymous = APIClient().post("/api/auth/token/", data=json.dumps({"username": "x" * 10_000_000}),
                                 content_type="application/json")
    assert anonymous.status_code == 413


def _parts(names: list[str], *, files: bool) -> str:
    disposition = 'form-data; name="file"; filename="{}.json"' if files else 'form-data; name="{}"'
    parts = [f"--x\r\nContent-Disposition: {disposition.format(name)}\r\n\r\n[]\r\n" for name in names]
    return "".join(parts) + "--x--\r\n"


def test_a_body_of_too_many_fields_or_files_is_a_json_400(api, user, settings):
    """Django refuses a form past DATA_UPLOAD_MAX_NUMBER_FIELDS or a multipart past ..._FILES with its
    HTML "Bad Request (400)" page, which an API client cannot read."""
    fields = [f"f{i}" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)]
    form = "&".join(f"{name}=x" for name in fields)
    sent = [
        ("POST", "/api/conversations/", form, "application/x-www-form-urlencoded"),
        ("PATCH", "/api/settings/", _parts(fields, files=False), "multipart/form-data; boundary=x"),
        ("POST", "/api/imports/", _parts([f"f{i}" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FILES + 1)],
                                         files=True), "multipart/form-data; boundary=x"),
    ]
    for method, path, body, kind in sent:
        response = api.generic(method, path, body, content_type=kind)
        assert response.status_code == 400 and response["Content-Type"] == "application/json", path
        assert "too many" in response.json()["detail"], path
    assert not Conversation.objects.exists()
