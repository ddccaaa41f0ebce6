"""Jobs of an account an admin turned off (is_active=False) after they were queued: a summary, a chat
title and an import. The account can do nothing else (no sign-in, no token, its share links answer
404), so its jobs do nothing either when a worker takes them: no call to its model endpoint, nothing
written to its chats. Each ends (a summary cancelled, an import failed, saying why) instead of waiting,
so the periodic sweep does not publish it again and again; the controls run the same job for an
account that is on."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chatapp.chat.import_models import ImportJob
from chatapp.chat.import_services import import_job_create, import_job_run
from chatapp.chat.models import Conversation, Message, SummaryJob
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import conversation_compact
from chatapp.chat.tasks import import_conversations
from chatapp.chat.title_services import conversation_title_generate
from tests.chat.importkit import file_bytes

pytestmark = pytest.mark.django_db(transaction=True)


def _turn_off(owner) -> None:
    owner.is_active = False
    owner.save(update_fields=["is_active"])


@pytest.mark.parametrize("active", [True, False])
def test_a_summary_of_a_turned_off_account_calls_no_model_and_is_cancelled(
    owner, make_config, long_conversation, fake_openai, published, active
):
    conversation = long_conversation(config=make_config("fake-echo"))
    job = conversation_compact(conversation=conversation, instructions="")
    if not active:
        _turn_off(owner)
    fake_openai.reset()

    outcome = summary_job_run(job_id=job.pk)

    job.refresh_from_db()
    if active:
        assert outcome.status == "done" and fake_openai.requests
        return
    assert outcome.status == "cancelled" and job.status == SummaryJob.Status.CANCELLED
    assert "turned off" in job.error and job.finished_at is not None
    assert fake_openai.requests == [] and job.summary_id is None
    assert not Message.objects.filter(conversation=conversation, kind=Message.Kind.SUMMARY).exists()


@pytest.mark.parametrize("active", [True, False])
def test_a_title_for_a_turned_off_account_calls_no_model(owner, make_config, fake_openai, active):
    conversation = Conversation.objects.create(owner=owner, title="Which trams go", llm_config=make_config("fake-echo"))
    question = Message.objects.create(conversation=conversation, role="user", content="Which trams go to Belém?")
    Message.objects.create(
        conversation=conversation, role="assistant", content="The 15E.", reply_to=question, parent=question
    )
    if not active:
        _turn_off(owner)
    fake_openai.reset()

    outcome = conversation_title_generate(conversation_id=conversation.pk, expected="Which trams go")

    conversation.refresh_from_db()
    if active:
        assert outcome == "named" and fake_openai.requests
        return
    assert outcome == "skipped" and fake_openai.requests == [] and conversation.title == "Which trams go"


@pytest.mark.parametrize("active", [True, False])
def test_an_import_for_a_turned_off_account_imports_nothing_and_fails_saying_why(
    owner, monkeypatch, django_capture_on_commit_callbacks, active
):
    monkeypatch.setattr(import_conversations, "apply_async", lambda **kwargs: None)
    with django_capture_on_commit_callbacks(execute=True):
        job = import_job_create(
            owner=owner, upload=SimpleUploadedFile("conversations.json", file_bytes("chatgpt_branch.json"))
        )
    if not active:
        _turn_off(owner)

    outcome = import_job_run(job_id=job.pk)

    job.refresh_from_db()
    if active:
        assert outcome.status == "done" and Conversation.objects.filter(owner=owner).exists()
        return
    assert outcome.status == "failed" and job.status == ImportJob.Status.FAILED and "turned off" in job.error
    assert not Conversation.objects.filter(owner=owner).exists() and job.payload in (b"", memoryview(b""))
