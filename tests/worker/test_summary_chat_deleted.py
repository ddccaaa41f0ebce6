"""A chat deleted while its summary job runs: the delivery ends quietly, writing nothing, whichever step
the deletion lands in (in-process, no worker)."""

from __future__ import annotations

import pytest

from chatapp.chat import summary_runner, summary_writing
from chatapp.chat.models import Conversation, Message, SummaryJob
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import summary_job_request
from chatapp.chat.tasks import summarize_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def _deleting_during(conversation_id: int, real):
    """`real`, run after the chat is deleted (the user's DELETE landing while that step runs)."""

    def step(*args, **kwargs):
        Conversation.objects.filter(pk=conversation_id).delete()
        return real(*args, **kwargs)

    return step


def test_a_chat_deleted_while_the_model_writes_its_summary_ends_the_job_without_an_error(
    make_config, long_conversation, fake_openai, published, monkeypatch
):
    conversation = long_conversation(config=make_config("fake-echo"))
    job = summary_job_request(conversation=conversation, trigger="auto")
    monkeypatch.setattr(summary_writing, "llm_complete",
                        _deleting_during(conversation.pk, summary_writing.llm_complete))

    assert summarize_conversation(job.pk) == "skipped"
    assert not Message.objects.filter(conversation_id=conversation.pk).exists()
    assert not SummaryJob.objects.filter(pk=job.pk).exists()


def test_a_chat_deleted_while_its_extractive_summary_is_written_ends_the_job_without_an_error(
    long_conversation, published, monkeypatch
):
    conversation = long_conversation(config=None)  # the offline model: the extractive summarizer writes it
    job = summary_job_request(conversation=conversation, trigger="auto")
    monkeypatch.setattr(summary_runner.optimizer, "extractive_summary",
                        _deleting_during(conversation.pk, summary_runner.optimizer.extractive_summary))

    assert summarize_conversation(job.pk) == "skipped"
    assert not Message.objects.filter(conversation_id=conversation.pk).exists()


def test_a_job_whose_chat_was_deleted_before_its_delivery_is_skipped(long_conversation, published):
    conversation = long_conversation(config=None)
    job = summary_job_request(conversation=conversation, trigger="auto")
    Conversation.objects.filter(pk=conversation.pk).delete()

    assert summary_job_run(job_id=job.pk).status == "skipped"
