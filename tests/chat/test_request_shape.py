"""Requests that strict chat templates accept (issue 14): one leading system message, user and
assistant alternating, whatever the turn carries — a summary, a recall block, a reply that failed.

Against the fake server's `strict-` models, which refuse what vLLM or llama.cpp answer with a 400 for
Llama- or Mistral-style templates.
"""

from __future__ import annotations

import openai
import pytest

from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, OptimizationRecord
from chatapp.chat.search_services import conversation_index_rebuild
from tests.support.chat import TEST_KEY, make_config, seed_messages, send
from tests.support.fake_openai import strict_template_problem

pytestmark = pytest.mark.django_db

SYSTEM = {"role": "system", "content": "Be brief."}
USER = {"role": "user", "content": "Hi"}
ASSISTANT = {"role": "assistant", "content": "Hello."}


def _record(result) -> OptimizationRecord:
    assert result.names[-1] == "done", result.events
    return OptimizationRecord.objects.get(reply_id=result.named("start")[0]["assistant_message"]["id"])


@pytest.mark.parametrize("messages", [
    [USER, USER],
    [USER, SYSTEM, USER],
    [SYSTEM, ASSISTANT, USER],
    [SYSTEM, USER, ASSISTANT],
])
def test_the_strict_fake_refuses_what_strict_templates_refuse(fake_openai, messages):
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key=TEST_KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError, match=r"alternate|System role"):
        client.chat.completions.create(model="strict-echo", messages=messages)
    reply = client.chat.completions.create(model="strict-echo", messages=[SYSTEM, USER, ASSISTANT, USER])
    assert reply.choices[0].message.content


def test_a_reply_that_failed_leaves_two_questions_that_go_as_one(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="strict-echo")
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    config.model = "cut-stream"
    config.save()
    assert send(user, conversation, "What is a GIN index?").names[-1] == "error"
    config.model = "strict-echo"
    config.save()
    fake_openai.reset()

    record = _record(send(user, conversation, "And when is it slower than a B-tree?"))

    [received] = [c.messages for c in fake_openai.completions]
    assert received == [{"role": "user", "content": "What is a GIN index?\n\nAnd when is it slower than a B-tree?"}]
    assert record.stats["request_shape"] == ["consecutive user messages merged"]


def test_a_summarized_turn_with_recall_passes_a_strict_template(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="strict-echo", window=4_000, max_output=500)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    message_append(conversation=conversation, role="user", content="Hello! Notes on our database follow.")
    message_append(conversation=conversation, role="assistant", content="Go ahead.")
    fact = message_append(conversation=conversation, role="user", content="We indexed the notes with a GIN index.")
    message_append(conversation=conversation, role="assistant", content="A GIN index suits full-text search.")
    ids = seed_messages(conversation, 400, model="strict-echo")
    summary = message_append(
        conversation=conversation, role="system", kind="summary",
        content="[Conversation summary — covers messages 5-204]\n\nWe compared indexes.",
        covers_from_id=ids[0], covers_through_id=ids[199],
    )
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[200])
    conversation_index_rebuild(conversation=conversation)
    fake_openai.reset()

    record = _record(send(user, conversation, "Which index did we put on the notes?"))

    received = fake_openai.completions[-1].messages
    assert strict_template_problem(received) is None
    assert received[0] == {"role": "system", "content": summary.content}
    assert "We indexed the notes with a GIN index." in received[-1]["content"]  # recalled, in the newest message
    assert received[-1]["content"].endswith("\n\nWhich index did we put on the notes?")
    assert fact.pk in record.stats["recall_ids"] or str(fact.pk) in record.stats["recall_ids"]
    assert {"the summary moved to the leading system message", "the recall block opens the newest message"} <= set(
        record.stats["request_shape"]
    )
