"""A summary's model calls fit the summary model's context window, whatever the span holds."""

from __future__ import annotations

import pytest

import optimizer
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import conversation_compact

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_pasted_log_longer_than_the_window_is_summarized_by_the_model_within_its_window(
    owner, make_config, fake_openai, published
):
    """A log pasted into a chat on a 4,096-token model is sent to the chat shortened (head and tail),
    but the summary asked the model about it whole: a request of 6,680 tokens, which a real endpoint
    refuses (context_length_exceeded), so the compaction failed and an extractive summary was written."""
    config = make_config("gpt-4o-mini")
    config.context_window, config.max_output_tokens = 4_096, 500
    config.save()
    conversation = Conversation.objects.create(owner=owner, llm_config=config)
    pasted = "\n".join(f"Line {i} of the log: service {i % 7} answered in {i * 3} ms." for i in range(400))
    assert optimizer.count_text(pasted, model="gpt-4o-mini") > config.context_window
    for i in range(6):
        content = pasted if i == 1 else f"Question {i}: what about invoice INV-{1000 + i}?"
        message_append(conversation=conversation, role="user", content=content, token_model="gpt-4o-mini")
        message_append(conversation=conversation, role="assistant", content=f"Answer {i}.", token_model="gpt-4o-mini")
    fake_openai.reset()

    job = conversation_compact(conversation=conversation)
    outcome = summary_job_run(job_id=job.pk)

    assert outcome.status == "done"
    job.refresh_from_db()
    assert not job.summary.extractive
    calls = [r for r in fake_openai.completions if "Messages to summarize" in r.messages[-1]["content"]]
    assert calls
    for call in calls:
        prompt = optimizer.count_messages(call.messages, model="gpt-4o-mini")
        assert prompt + call.body["max_tokens"] <= config.context_window
    # the model still reads the log's beginning and end, as the chat sends it
    read = "\n".join(call.messages[-1]["content"] for call in calls)
    assert "Line 0 of the log" in read and "Line 399 of the log" in read
