"""A reasoning model's reply: its thinking streams as `reasoning` events and is stored apart from the
answer (Message.reasoning), shown folded on the page, exported and imported, and never sent back to
the model, counted or summarized as the answer is."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

import optimizer
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from tests.chat.importkit import export_document, import_now
from tests.support.chat import make_config, send
from tests.support.fake_openai import echo_reply, thinking_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake(fake_openai):
    fake_openai.reset()
    return fake_openai


def test_a_block_the_template_opened_is_stored_apart_once_the_reply_ends(user, fake):
    conversation = Conversation.objects.create(
        owner=user, llm_config=make_config(user, fake.base_url, model="think-unopened")
    )

    result = send(user, conversation, "Where did we leave the bikes?")

    sent = fake.completions[-1].messages
    thought, answer = thinking_text(sent), echo_reply(sent)
    assert result.text.startswith(thought)  # told apart only when whole: it streamed as text
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert (reply.reasoning, reply.content) == (thought, answer)
    done = result.named("done")[0]["message"]
    assert (done["reasoning"], done["content"]) == (thought, answer)

    send(user, conversation, "And then?")
    assert not any(thought in json.dumps(m) for m in fake.completions[-1].messages)


def test_a_plain_reply_that_names_the_close_tag_keeps_its_whole_answer(user, fake):
    # fake-echo repeats the question: its answer names </think> once, as an answer about Qwen's output may.
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake.base_url))

    send(user, conversation, "In Qwen's output, what does </think> mean?")

    answer = echo_reply(fake.completions[-1].messages)
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert (reply.reasoning, reply.content) == (None, answer)
    send(user, conversation, "And then?")
    assert [m["content"] for m in fake.completions[-1].messages if m["role"] == "assistant"] == [answer]


@pytest.mark.parametrize("model", ["think-fields", "think-inline"])
def test_the_thinking_streams_and_is_stored_apart_from_the_answer(user, fake, model):
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake.base_url, model=model))

    result = send(user, conversation, "Where did we leave the bikes?")

    assert result.names[-1] == "done", result.events
    sent = fake.completions[-1].messages
    thought, answer = thinking_text(sent), echo_reply(sent)
    assert "".join(d["text"] for d in result.named("reasoning")) == thought
    assert result.text == answer
    assert result.names.index("reasoning") < result.names.index("delta")
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert (reply.reasoning, reply.content, reply.status) == (thought, answer, Message.Status.COMPLETE)
    # What the next request will send of it is what is counted: the answer alone.
    assert reply.token_count == optimizer.count_message({"role": "assistant", "content": answer}, model=model)
    done = result.named("done")[0]["message"]
    assert (done["reasoning"], done["content"]) == (thought, answer)
    assert thought not in done["html"]


@pytest.mark.parametrize("model", ["think-fields", "think-inline"])
def test_an_empty_block_is_no_thinking(user, fake, model):
    # Qwen3 told /no_think still writes <think>\n\n</think>: no empty "Thinking" above the answer.
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake.base_url, model=model))

    result = send(user, conversation, "Where are the bikes? /no_think")

    assert result.named("reasoning") == []
    assert result.text == echo_reply(fake.completions[-1].messages)
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert (reply.reasoning, reply.content) == (None, result.text)
    assert result.named("done")[0]["message"]["reasoning"] == ""


def test_a_reply_cut_off_while_the_model_thought_was_billed(user, fake, monkeypatch):
    # The endpoint took the request and streamed thinking (billed tokens) before the connection broke:
    # no answer text, no usage, but not a refusal, whose cost the dashboard counts as nothing.
    monkeypatch.setattr(optimizer, "cost_usd", lambda model, **tokens: 0.25)
    conversation = Conversation.objects.create(
        owner=user, llm_config=make_config(user, fake.base_url, model="think-fields-cut")
    )

    assert send(user, conversation, "Where did we leave the bikes?").names[-1] == "error"

    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert (reply.status, reply.content) == (Message.Status.ERROR, "")
    assert reply.reasoning
    record = OptimizationRecord.objects.get(conversation=conversation)
    assert float(record.cost_sent_usd) == 0.25


def test_the_thinking_is_never_sent_back_to_the_model(user, fake):
    conversation = Conversation.objects.create(
        owner=user, llm_config=make_config(user, fake.base_url, model="think-inline")
    )
    send(user, conversation, "First question, about trains")
    thought = thinking_text(fake.completions[-1].messages)

    assert send(user, conversation, "Second question").names[-1] == "done"

    history = fake.completions[-1].messages
    replies = [m["content"] for m in history if m["role"] == "assistant"]
    assert replies == [Message.objects.filter(conversation=conversation, role="assistant").first().content]
    assert not any(thought in json.dumps(m) or "<think>" in json.dumps(m) for m in history)


def _reasoned_chat(user) -> tuple[Conversation, Message]:
    conversation = Conversation.objects.create(owner=user, title="Bikes")
    question = Message.objects.create(conversation=conversation, role="user", content="Where are the bikes?")
    reply = Message.objects.create(
        conversation=conversation, role="assistant", content="In the **shed**.", reply_to=question, parent=question,
        reasoning="They said shed on Monday.\n<b>not markup</b>",
    )
    return conversation, reply


def test_the_page_and_the_api_show_the_thinking_folded_and_as_text(user):
    conversation, reply = _reasoned_chat(user)
    client = Client()
    client.force_login(user)

    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert '<details class="msg-thinking is-done">' in page
    assert "They said shed on Monday.\n&lt;b&gt;not markup&lt;/b&gt;" in page
    listed = client.get(f"/api/conversations/{conversation.pk}/messages/").json()["results"]
    assert [m["reasoning"] for m in listed] == ["", reply.reasoning]

    # A reply still thinking, as a page following it from another tab reads it.
    Message.objects.filter(pk=reply.pk).update(status=Message.Status.STREAMING, content="")
    fragment = client.get(f"/c/{conversation.pk}/messages/?since={reply.pk}").content.decode()
    assert '<details class="msg-thinking" open>' in fragment and "Thinking…" in fragment


async def _read(chunks) -> str:
    return b"".join([chunk async for chunk in chunks]).decode()


def test_exports_carry_the_thinking_and_an_import_of_the_json_keeps_it(user):
    conversation, reply = _reasoned_chat(user)
    client = Client()
    client.force_login(user)
    response = client.get(f"/api/conversations/{conversation.pk}/export/?format=markdown")
    markdown = async_to_sync(_read)(response.streaming_content)
    assert "> **Thinking**\n>\n> They said shed on Monday.\n> <b>not markup</b>\n\nIn the **shed**." in markdown
    document = export_document(conversation)
    assert [m["reasoning"] for m in document["messages"]] == [None, reply.reasoning]

    job = import_now(user, json.dumps(document).encode())
    assert job.status == "done", job.error
    copy = Conversation.objects.exclude(pk=conversation.pk).get(owner=user)
    assert list(copy.messages.order_by("id").values_list("reasoning", flat=True)) == [None, reply.reasoning]


def test_imported_thinking_is_held_to_the_reply_limit_as_streamed_thinking_is(user, settings):
    conversation, reply = _reasoned_chat(user)
    Message.objects.filter(pk=reply.pk).update(reasoning="Weighing it. " * 20)
    document = export_document(conversation)
    settings.MAX_REPLY_CHARS = 60

    job = import_now(user, json.dumps(document).encode())

    assert job.status == "done", job.error
    copy = Conversation.objects.exclude(pk=conversation.pk).get(owner=user)
    imported = copy.messages.get(role="assistant")
    assert imported.reasoning.startswith(("Weighing it. " * 5)[:60])
    assert imported.reasoning.endswith("[Thinking cut here: it reached the 60-character limit.]")
    assert imported.content == "In the **shed**."
