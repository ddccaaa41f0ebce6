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


def test_the_model_reads_the_span_under_the_days_it_was_said(owner, make_config, fake_openai, published):
    """A chat that runs over weeks: the summary request dates its messages, so that "yesterday" in a
    message of May 8 is summarized as May 7, not left to be read against the day the summary is."""
    import datetime as dt

    from chatapp.chat.models import Message

    config = make_config("gpt-4o-mini")
    conversation = Conversation.objects.create(owner=owner, llm_config=config)
    for i in range(6):
        message_append(conversation=conversation, role="user", content=f"Question {i}: the support group yesterday?",
                       token_model="gpt-4o-mini")
        message_append(conversation=conversation, role="assistant", content=f"Answer {i}: " + "a long answer " * 80,
                       token_model="gpt-4o-mini")
    for i, message in enumerate(conversation.messages.order_by("id")):
        Message.objects.filter(pk=message.pk).update(created_at=dt.datetime(2023, 5, 8 + i // 4, 12, tzinfo=dt.UTC))
    fake_openai.reset()

    job = conversation_compact(conversation=conversation)
    outcome = summary_job_run(job_id=job.pk)
    assert outcome.status == "done", outcome

    calls = [r for r in fake_openai.completions if "Messages to summarize" in r.messages[-1]["content"]]
    assert len(calls) == 1
    system, span = calls[0].messages[0]["content"], calls[0].messages[-1]["content"]
    # messages 0-3 on May 8 (the first question opens every request: not in a summary), 4-7 on May 9;
    # the last two rounds (May 10) are kept as they are
    assert span.index("[Mon 8 May 2023]") < span.index("ASSISTANT: Answer 0") < span.index("[Tue 9 May 2023]")
    assert span.index("[Tue 9 May 2023]") < span.index("USER: Question 2")
    assert span.count("[Mon 8 May 2023]") == span.count("[Tue 9 May 2023]") == 1 and "10 May" not in span
    assert "relative time" in system
