"""Accounts made on the sign-up page are limited per client address (login_throttle, in the cache:
shared through Redis when configured): past the limit, 429 with Retry-After and the form saying how
long to wait, and no account is made."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db

PASSWORD = "a long test password 1"


def _sign_up(client, username: str, *, address: str = "203.0.113.7", again: str = PASSWORD):
    client.logout()
    return client.post(
        "/accounts/signup/", {"username": username, "password1": PASSWORD, "password2": again}, REMOTE_ADDR=address
    )


def test_past_the_address_limit_no_account_is_made_and_the_page_says_how_long_to_wait(client, login_rates):
    login_rates(signup="2/hour")
    assert _sign_up(client, "first").status_code == 302
    assert _sign_up(client, "second").status_code == 302

    refused = _sign_up(client, "third")

    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 3600
    assert "Too many accounts were made from this address. Try again in" in refused.content.decode()
    assert not get_user_model().objects.filter(username="third").exists()
    assert "_auth_user_id" not in client.session
    assert _sign_up(client, "third", address="198.51.100.9").status_code == 302  # another address


def test_a_form_refused_for_its_fields_makes_no_account_and_does_not_count(client, login_rates):
    login_rates(signup="1/hour")
    assert _sign_up(client, "typo", again="not the same password").status_code == 200
    assert _sign_up(client, "ok").status_code == 302


def test_the_limit_has_a_default_named_in_the_readme(settings):
    from pathlib import Path

    assert settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["signup_address"]
    readme = (Path(settings.BASE_DIR) / "README.md").read_text(encoding="utf-8")
    assert "THROTTLE_SIGNUP_ADDRESS" in readme


def test_a_form_sent_twice_at_once_makes_one_account_and_the_second_is_told_the_name_is_taken(
    client, monkeypatch, login_rates
):
    # A double-click on Sign up: both forms are checked before either account is saved (the password is
    # hashed in between), so the second finds the name free and then meets the first's row.
    from chatapp.chat import account_pages

    counted = account_pages.signup_attempt_start

    def first_saved_meanwhile(*, request):
        get_user_model().objects.create_user("twice", password=PASSWORD)
        return counted(request=request)

    monkeypatch.setattr(account_pages, "signup_attempt_start", first_saved_meanwhile)
    login_rates(signup="1/hour")

    second = _sign_up(client, "twice")

    assert second.status_code == 200
    assert "A user with that username already exists." in second.content.decode()
    assert get_user_model().objects.filter(username__iexact="twice").count() == 1
    assert "_auth_user_id" not in client.session
    monkeypatch.setattr(account_pages, "signup_attempt_start", counted)
    assert _sign_up(client, "another").status_code == 302  # the refused form was not counted


def test_the_addresses_of_one_ipv6_network_share_the_sign_up_limit(client, login_rates):
    login_rates(signup="1/hour")
    assert _sign_up(client, "first", address="2001:db8:1:2::1").status_code == 302

    assert _sign_up(client, "second", address="2001:db8:1:2::2").status_code == 429
    assert _sign_up(client, "second", address="2001:db8:1:3::2").status_code == 302  # another network
