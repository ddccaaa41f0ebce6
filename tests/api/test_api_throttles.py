"""Fair limits (issue 11, findings 5 and 8): password guesses on the token endpoint, connection
tests and /compact are throttled, with a JSON 429 and Retry-After (also in the body, as `retry_after`, the
one 429 shape the send limit answers too: README, API)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from chatapp.chat.models import Conversation, SummaryJob
from tests.support.accounts import PASSWORD

pytestmark = pytest.mark.django_db


def _throttled(response) -> bool:
    """A 429 of the API's shape: `detail`, and `retry_after` in the body as in the Retry-After header (a
    client reading the body, as the send limit's 429 has it, found no wait in the throttles' own)."""
    body = response.json()
    return (response.status_code == 429 and int(response["Retry-After"]) > 0 and "detail" in body
            and body.get("retry_after") == int(response["Retry-After"]))


def test_password_guesses_on_the_token_endpoint_are_throttled(user):
    client = APIClient()
    answers = [client.post("/api/auth/token/", {"username": user.username, "password": f"guess-{k}"},
                           format="json") for k in range(11)]
    assert [a.status_code for a in answers[:10]] == [400] * 10
    assert _throttled(answers[10])


def test_connection_tests_are_throttled_per_user(api, user, make_config):
    config = make_config(user)
    answers = [api.post(f"/api/configs/{config.pk}/test/") for _ in range(21)]
    assert all(a.status_code == 200 for a in answers[:20])
    assert _throttled(answers[20])


def test_compactions_are_throttled_per_user(api, user, make_conversation):
    conversation = make_conversation(user, messages=30)
    answers = [api.post(f"/api/conversations/{conversation.pk}/compact/", {}, format="json") for _ in range(11)]
    assert all(a.status_code in (200, 201, 202) for a in answers[:10]), [a.status_code for a in answers]
    assert _throttled(answers[10])
    assert SummaryJob.objects.filter(conversation=conversation).count() >= 1
    assert Conversation.objects.filter(pk=conversation.pk).exists()


def test_a_forged_forwarded_for_does_not_reset_the_token_throttle(user):
    client = APIClient()
    answers = [client.post("/api/auth/token/", {"username": user.username, "password": f"guess-{k}"},
                           format="json", HTTP_X_FORWARDED_FOR=f"10.0.0.{k}") for k in range(11)]
    assert _throttled(answers[10])


def _token(username: str, password: str, address: str):
    return APIClient().post("/api/auth/token/", {"username": username, "password": password}, format="json",
                            REMOTE_ADDR=address)


def test_the_token_endpoint_keeps_the_login_pages_limit_per_username(user, login_rates):
    """Guesses spread over many addresses stop at the username's limit on the login page: the token
    endpoint checks the same passwords, so it must not go on answering them past that limit."""
    login_rates(address="100/hour", username="2/hour")
    for k in range(2):
        _token(user.username, f"guess-{k}", address=f"198.51.100.{k}")

    refused = _token(user.username, PASSWORD, address="198.51.100.9")

    assert _throttled(refused)
    assert "token" not in refused.json()
    # Another user is not held by ada's count.
    assert _token("somebody-else", "wrong", address="198.51.100.9").status_code == 400


def test_the_login_pages_failures_count_on_the_token_endpoint_too(client, user, login_rates):
    login_rates(address="100/hour", username="2/hour")
    for k in range(2):
        client.post("/accounts/login/", {"username": user.username, "password": f"wrong {k}"},
                    REMOTE_ADDR=f"198.51.100.{k}")

    assert _throttled(_token(user.username, PASSWORD, address="198.51.100.9"))


def test_a_token_issued_clears_the_usernames_count(user, login_rates):
    login_rates(address="100/hour", username="2/hour")
    _token(user.username, "guess-1", address="198.51.100.1")
    assert _token(user.username, PASSWORD, address="198.51.100.2").status_code == 200
    _token(user.username, "guess-2", address="198.51.100.3")

    assert _token(user.username, PASSWORD, address="198.51.100.4").status_code == 200
