"""Secrets never reach the logs: a model config's API key (stored, refused, echoed back by a careless
endpoint), a password sent to the token endpoint, and an API token's key, whatever the API answered."""

from __future__ import annotations

import logging

import pytest
from rest_framework.test import APIClient

from tests.support.accounts import PASSWORD, api_key_for

pytestmark = pytest.mark.django_db

WRONG_PASSWORD = "wrong-PASSWORD-never-logged-4k2"


def test_no_secret_is_logged_whatever_the_answer(api, user, plain_key, fake_openai, caplog):
    caplog.set_level(logging.DEBUG)
    token_key = api_key_for(user)
    echoing = api.post("/api/configs/", {"name": "echoes", "base_url": fake_openai.base_url, "model": "fail-401",
                                         "api_key": plain_key}, format="json").json()
    refused = [
        api.post("/api/configs/", {"name": "bad", "base_url": "ftp://x", "model": "m", "api_key": plain_key},
                 format="json"),
        api.post("/api/configs/", {"name": "bad", "base_url": fake_openai.base_url, "model": "m",
                                   "api_key": plain_key + "\x00"}, format="json"),
        api.patch(f"/api/configs/{echoing['id']}/", {"api_key": [plain_key]}, format="json"),
        APIClient().post("/api/auth/token/", {"username": user.username, "password": WRONG_PASSWORD}, format="json"),
        APIClient(HTTP_AUTHORIZATION=f"Token {token_key}x").get("/api/conversations/"),
    ]
    assert all(400 <= response.status_code < 500 for response in refused)
    assert api.post(f"/api/configs/{echoing['id']}/test/").status_code == 200
    chat = api.post("/api/conversations/", {"llm_config": echoing["id"]}, format="json").json()
    failed = api.post(f"/api/conversations/{chat['id']}/messages/", {"content": "hello"}, format="json")
    assert b"event: error" in failed.recorded_body
    assert APIClient().post("/api/auth/token/", {"username": user.username, "password": PASSWORD},
                            format="json").status_code == 200

    assert fake_openai.requests  # the key did travel to the model, and the model echoed it
    logged = caplog.text + "".join(str(record.__dict__) for record in caplog.records)
    for secret in (plain_key, WRONG_PASSWORD, PASSWORD, token_key):
        assert secret not in logged


def test_a_stream_event_passed_over_is_logged_without_the_key_it_echoes(api, plain_key, fake_openai, caplog):
    caplog.set_level(logging.DEBUG)
    config = api.post("/api/configs/", {"name": "noting", "base_url": fake_openai.base_url, "model": "note-key",
                                        "api_key": plain_key}, format="json").json()
    chat = api.post("/api/conversations/", {"llm_config": config["id"]}, format="json").json()
    sent = api.post(f"/api/conversations/{chat['id']}/messages/", {"content": "hello"}, format="json")

    assert b"event: done" in sent.recorded_body  # the notice was passed over, the reply went on
    noted = [record.getMessage() for record in caplog.records if "not JSON" in record.getMessage()]
    assert noted  # still logged, for whoever runs the server
    logged = caplog.text + "".join(str(record.__dict__) for record in caplog.records)
    assert plain_key not in logged
