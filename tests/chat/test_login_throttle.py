"""Failed sign-ins on the login page are limited per client address and per username."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

PASSWORD = "a long test password 1"


def _login(client, username: str, password: str, address: str = "203.0.113.7"):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_past_the_address_limit_even_the_right_password_waits(client, user, login_rates):
    login_rates(address="3/hour", username="100/hour")
    for attempt in range(3):
        assert _login(client, "ada", f"wrong {attempt}").status_code == 200  # the form, with its error

    refused = _login(client, "ada", PASSWORD)

    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 3600
    assert "Too many failed sign-ins. Try again in" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    assert _login(client, "ada", PASSWORD, address="198.51.100.9").status_code == 302  # another address


def test_a_username_guessed_from_many_addresses_waits_and_a_success_clears_it(client, user, login_rates):
    login_rates(address="100/hour", username="2/hour")
    _login(client, "ada", "wrong 1", address="198.51.100.1")
    assert _login(client, "ada", PASSWORD, address="198.51.100.2").status_code == 302  # clears the count
    client.post("/accounts/logout/")
    _login(client, "ada", "wrong 2", address="198.51.100.3")
    _login(client, "ADA", "wrong 3", address="198.51.100.4")  # usernames count case-blind

    assert _login(client, "ada", PASSWORD, address="198.51.100.5").status_code == 429
    assert _login(client, "somebody-else", "wrong", address="198.51.100.5").status_code == 200  # not their limit


def test_the_admin_signs_in_through_the_same_page(client):
    response = client.get("/admin/login/?next=/admin/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/admin/"


def test_a_signed_in_account_that_is_not_staff_gets_the_form_at_the_admin_not_a_redirect_loop(client, user):
    """The admin sent it to this page, which sent a signed-in account back to `next`, the admin: the
    browser gave up on too many redirects. It gets the form, saying why, to sign in as a staff account."""
    client.force_login(user)

    admin = client.get("/admin/", follow=True)

    assert admin.status_code == 200 and admin.request["PATH_INFO"] == "/accounts/login/"
    assert len(admin.redirect_chain) == 2
    assert "You are signed in as ada, which cannot open the admin" in admin.content.decode()
    assert client.get("/accounts/login/?next=/c/new/")["Location"] == "/c/new/"  # elsewhere: as before


def test_a_signed_in_account_sent_to_the_sign_in_page_after_itself_goes_home_not_to_a_500(client, user):
    """`next` naming the sign-in page itself: Django's own loop check raised, a server error."""
    client.force_login(user)

    answer = client.get("/accounts/login/?next=/accounts/login/")

    assert answer.status_code == 302 and answer["Location"] == "/"


def test_a_sign_in_with_no_password_does_not_clear_the_count(client, user, login_rates):
    # The form raised nothing for a blank password ("required" is the field's), and that cleared the
    # count: a guess, a blank, a guess, a blank... never reached the username's limit.
    login_rates(address="100/hour", username="2/hour")
    _login(client, "ada", "wrong 1", address="198.51.100.1")
    assert _login(client, "ada", "", address="198.51.100.2").status_code == 200
    assert _login(client, "ada", "wrong 2", address="198.51.100.3").status_code == 200

    assert _login(client, "ada", PASSWORD, address="198.51.100.4").status_code == 429


def test_guesses_sent_at_once_stop_at_the_limit(login_rates, monkeypatch):
    """A password check takes a while (the hasher is slow on purpose): guesses sent together all found
    the count below the limit before any of them was counted, and every one was checked."""
    import threading
    import time

    from django.test import Client

    login_rates(address="100/hour", username="2/hour")
    checked: list[str] = []

    def slow_authenticate(request=None, **credentials):
        checked.append(credentials.get("password", ""))
        time.sleep(0.3)
        return None

    monkeypatch.setattr("django.contrib.auth.forms.authenticate", slow_authenticate)
    answers: list[int] = []
    threads = [
        threading.Thread(target=lambda k=k: answers.append(_login(Client(), "ada", f"guess {k}").status_code))
        for k in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(checked) == 2
    assert sorted(answers) == [200, 200, *[429] * 6]


def test_guesses_of_the_current_password_on_the_password_change_page_keep_the_limits(client, user, login_rates):
    """The page checks the same password as the sign-in: a session left open (a shared computer) could
    guess it there without end, and learn the password that outlives the session."""
    from django.test import Client

    login_rates(address="100/hour", username="3/hour")
    client.force_login(user)
    new = "another long password 9"
    for attempt in range(3):
        page = client.post("/accounts/password/", {"old_password": f"wrong {attempt}", "new_password1": new,
                                                   "new_password2": new}, REMOTE_ADDR="203.0.113.7")
        assert page.status_code == 200  # the form, with its error

    refused = client.post("/accounts/password/", {"old_password": PASSWORD, "new_password1": new,
                                                  "new_password2": new}, REMOTE_ADDR="203.0.113.7")

    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 3600
    assert "Too many failed sign-ins. Try again in" in refused.content.decode()
    user.refresh_from_db()
    assert user.check_password(PASSWORD)
    # The guesses count for the sign-in page too: one username, one count.
    assert _login(Client(), "ada", PASSWORD, address="198.51.100.9").status_code == 429


def test_the_right_current_password_changes_it_and_clears_the_count(client, user, login_rates):
    login_rates(address="100/hour", username="2/hour")
    client.force_login(user)
    new = "another long password 9"
    client.post("/accounts/password/", {"old_password": "wrong", "new_password1": new, "new_password2": new})

    changed = client.post("/accounts/password/", {"old_password": PASSWORD, "new_password1": new,
                                                  "new_password2": new})

    assert changed.status_code == 302
    client.post("/accounts/logout/")
    _login(client, "ada", "wrong again")
    assert _login(client, "ada", new).status_code == 302


def test_a_username_signs_in_whatever_its_case_as_sign_up_reads_it(client, user, django_user_model):
    """Sign-up refuses "Ada" when "ada" exists, so "Ada" is that account's name too: signing in as
    "Ada" said the password was wrong. Two accounts that differ only by case (made before, or by an
    admin) each keep their exact name, and neither is signed in by a name in another case."""
    assert _login(client, "ADA", PASSWORD).status_code == 302
    assert int(client.session["_auth_user_id"]) == user.pk
    client.post("/accounts/logout/")
    assert _login(client, "ADA", "wrong").status_code == 200

    twin = django_user_model.objects.create_user(username="Ada", password="another long password 2")
    assert _login(client, "Ada", "another long password 2").status_code == 302
    assert int(client.session["_auth_user_id"]) == twin.pk
    client.post("/accounts/logout/")
    assert _login(client, "ada", PASSWORD).status_code == 302
    client.post("/accounts/logout/")
    assert _login(client, "aDA", PASSWORD).status_code == 200  # which of the two: none
    assert "_auth_user_id" not in client.session


def test_a_session_signed_in_by_djangos_own_backend_stays_signed_in(client, user):
    """Sessions record the backend that signed them in: those of the release before the case-blind
    backend (and sign-up's) named Django's ModelBackend, and were signed out if it was no longer listed."""
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    assert client.get("/api/conversations/").status_code == 200


def test_the_addresses_of_one_ipv6_network_share_the_address_limit(client, user, login_rates):
    # One machine holds a whole /64 (a VPS, a home line): counted per address, each guess could come
    # from an address of its own and the address limit never applied.
    login_rates(address="2/hour", username="100/hour")
    _login(client, "ada", "wrong 1", address="2001:db8:1:2::1")
    _login(client, "bob", "wrong 2", address="2001:db8:1:2:aaaa:bbbb:cccc:dddd")

    assert _login(client, "ada", PASSWORD, address="2001:db8:1:2::3").status_code == 429
    assert _login(client, "ada", PASSWORD, address="2001:db8:1:3::1").status_code == 302  # another network
