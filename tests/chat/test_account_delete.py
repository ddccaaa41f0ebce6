"""A user deletes their own account (Settings → Account → Delete account…, or DELETE /api/account/):
asked for the password again, under the failed sign-in limits; the account is off at once and a worker
deletes everything of it after (tests/chat/test_account_purge.py: in steps), nothing of another's; the
user is signed out; jobs queued for it before run harmlessly, before the worker and after it."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from chatapp.chat import tasks
from chatapp.chat.account_services import account_delete
from chatapp.chat.import_services import import_job_create
from chatapp.chat.models import Conversation, SummaryJob
from tests.support.account_data import account_with_everything, table_rows
from tests.support.accounts import PASSWORD, token_client

pytestmark = pytest.mark.django_db(transaction=True)


def _gone(user) -> bool:
    return not get_user_model().objects.filter(pk=user.pk).exists()


def _worker_deletes(user, published: list[int]) -> None:
    """The account is off, its deletion handed to the workers: run it as a worker would."""
    assert not get_user_model().objects.get(pk=user.pk).is_active and published == [user.pk]
    assert tasks.purge_account.apply(args=[user.pk]).get() == "deleted"


def _refused(link: str, key: str) -> bool:
    tokened = APIClient()
    tokened.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return Client().get(f"/s/{link}/").status_code == 404 and tokened.get("/api/conversations/").status_code == 401


def test_the_service_deletes_all_of_the_account_and_nothing_else(user, other_user, fake_openai, purges_published):
    account_with_everything(other_user, fake_openai)
    theirs = table_rows()
    link, key = account_with_everything(user, fake_openai)

    account_delete(user=user)
    assert _refused(link, key)  # at once, before the worker
    _worker_deletes(user, purges_published)

    assert _gone(user) and table_rows() == theirs and _refused(link, key)


def test_settings_leads_to_a_page_that_asks_for_the_password(user):
    page = Client()
    page.force_login(user)
    assert 'href="/accounts/delete/"' in page.get("/settings/").content.decode()
    asked = page.get("/accounts/delete/")
    assert asked.status_code == 200 and 'type="password"' in asked.content.decode()
    assert "no-store" in asked["Cache-Control"] or "no-cache" in asked["Cache-Control"]
    assert Client().get("/accounts/delete/").status_code == 302  # signed out: to the sign-in page


def test_the_page_deletes_the_account_with_the_right_password_and_signs_out(
    user, other_user, fake_openai, purges_published
):
    account_with_everything(other_user, fake_openai)
    theirs = table_rows()
    link, key = account_with_everything(user, fake_openai)
    page = Client()
    page.force_login(user)

    wrong = page.post("/accounts/delete/", {"password": "not my password"})
    assert wrong.status_code == 200 and not _gone(user)
    assert "password" in wrong.content.decode().lower()
    # The page's one field holds the focus, refused or not: a keyboard user types again at once.
    field = re.search(r"<input[^>]*type=\"password\"[^>]*>", wrong.content.decode())
    assert field and "autofocus" in field.group(0) and 'aria-invalid="true"' in field.group(0)

    deleted = page.post("/accounts/delete/", {"password": PASSWORD})
    _worker_deletes(user, purges_published)

    assert deleted.status_code == 302 and deleted["Location"] == "/accounts/login/"
    assert _gone(user) and table_rows() == theirs and _refused(link, key)
    assert "_auth_user_id" not in page.session
    assert "deleted" in page.get("/accounts/login/").content.decode()


def test_wrong_passwords_on_the_page_count_as_failed_sign_ins(user, login_rates):
    login_rates(address="2/hour", username="100/hour")
    page = Client()
    page.force_login(user)
    for attempt in range(2):
        page.post("/accounts/delete/", {"password": f"guess {attempt}"}, REMOTE_ADDR="203.0.113.7")

    refused = page.post("/accounts/delete/", {"password": PASSWORD}, REMOTE_ADDR="203.0.113.7")

    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0 and not _gone(user)
    assert "Too many failed sign-ins" in refused.content.decode()


def test_the_api_deletes_the_account_with_the_password(user, other_user, fake_openai, login_rates, purges_published):
    account_with_everything(other_user, fake_openai)
    theirs = table_rows()
    link, key = account_with_everything(user, fake_openai)
    api = token_client(user)

    wrong = api.delete("/api/account/", {"password": "not my password"}, format="json")
    assert wrong.status_code == 400 and "password" in wrong.json() and not _gone(user)
    assert api.delete("/api/account/", {}, format="json").status_code == 400

    assert api.delete("/api/account/", {"password": PASSWORD}, format="json").status_code == 204
    _worker_deletes(user, purges_published)
    assert _gone(user) and table_rows() == theirs and _refused(link, key)


def test_the_api_throttles_wrong_passwords(user, login_rates):
    login_rates(address="1/hour", username="100/hour")
    api = token_client(user)
    api.delete("/api/account/", {"password": "guess"}, format="json")

    refused = api.delete("/api/account/", {"password": PASSWORD}, format="json")

    assert refused.status_code == 429 and refused.json()["retry_after"] > 0 and not _gone(user)


def test_jobs_queued_before_the_deletion_run_harmlessly_after_it(
    user, fake_openai, monkeypatch, django_capture_on_commit_callbacks, purges_published
):
    """A summary, a title and an import published for the account, then the account deleted before a
    worker took them: run while the account is off, each ends without calling a model or writing a row
    (a summary cancelled, a title left, an import failed); run again once its data is deleted, each
    skips. None raises."""
    published: list[tuple[object, list]] = []
    for task in (tasks.summarize_conversation, tasks.import_conversations, tasks.generate_conversation_title):
        monkeypatch.setattr(task, "apply_async", lambda *, args, _task=task, **kw: published.append((_task, args)))
    chat = Conversation.objects.create(owner=user, title="New chat")
    job = SummaryJob.objects.create(conversation=chat, status=SummaryJob.Status.QUEUED)
    published.append((tasks.summarize_conversation, [job.pk]))
    published.append((tasks.generate_conversation_title, [chat.pk, "New chat"]))
    with django_capture_on_commit_callbacks(execute=True):
        import_job_create(owner=user, upload=SimpleUploadedFile("conversations.json", b"[]"))
    assert {task for task, _ in published} == {
        tasks.summarize_conversation,
        tasks.import_conversations,
        tasks.generate_conversation_title,
    }
    before = table_rows()

    account_delete(user=user)
    off, asked = table_rows(), len(fake_openai.requests)
    meanwhile = [task.apply(args=args).get() for task, args in published]
    assert table_rows() == off and len(fake_openai.requests) == asked
    _worker_deletes(user, purges_published)
    after = table_rows()
    outcomes = [task.apply(args=args).get() for task, args in published]

    assert meanwhile == ["cancelled", "skipped", "failed"]
    assert after != before and table_rows() == after
    assert outcomes == ["skipped", "skipped", "skipped"]


def test_signing_up_again_with_the_name_of_an_account_being_deleted_says_so(user, purges_published):
    # Told "Your account was deleted", the user signing up again under the same name read "A user with
    # that username already exists." until the worker was done: the name is said to come free soon.
    account_delete(user=user)
    form = {"username": user.username.upper(), "password1": "Zx9!a-long-pass", "password2": "Zx9!a-long-pass"}
    page = Client().post("/accounts/signup/", form).content.decode()
    assert "being deleted" in page and "already exists" not in page

    _worker_deletes(user, purges_published)
    assert Client().post("/accounts/signup/", form).status_code == 302  # the name is free: signed up
