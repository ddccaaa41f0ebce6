"""A reply the model ended at its output limit (finish_reason "length"): stored complete with the reason,
marked on the page with a Continue on the latest reply, in the API and both exports, kept by an import;
and never marked when the user stopped it or it ended on its own."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from chatapp.chat.imports.longchat import conversation_parse
from chatapp.chat.models import Conversation, Message
from tests.chat.importkit import export_document, import_now
from tests.support.chat import make_config, post_stream, send, send_stopped_elsewhere
from tests.support.fake_openai import echo_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake(fake_openai):
    fake_openai.reset()
    return fake_openai


def _cut_chat(user, fake) -> Conversation:
    # The fake server streams one word-sized piece per token: 3 output tokens cut every reply.
    return Conversation.objects.create(owner=user, llm_config=make_config(user, fake.base_url, max_output=3))


def test_a_reply_cut_at_the_output_limit_is_stored_complete_with_its_reason(user, fake):
    conversation = _cut_chat(user, fake)

    result = send(user, conversation, "Tell me everything about the bikes in the shed.")

    assert result.names[-1] == "done", result.events
    whole = echo_reply(fake.completions[-1].messages)
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert reply.status == Message.Status.COMPLETE
    assert reply.finish_reason == "length"
    assert reply.content and len(reply.content) < len(whole)  # what came before the cut is kept
    assert result.named("done")[0]["message"]["finish_reason"] == "length"


def test_a_reply_that_ends_on_its_own_says_stop(user, fake):
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake.base_url))

    result = send(user, conversation, "Where are the bikes?")

    assert result.named("done")[0]["message"]["finish_reason"] == "stop"
    assert Message.objects.get(conversation=conversation, role="assistant").finish_reason == "stop"


def test_a_reply_stopped_after_its_last_chunk_has_no_finish_reason(user, fake):
    # Stop pressed in a tab served by another web process, as the reply starts: the model's last chunk
    # (and its "length") comes after, and the reply stays stopped: the user's hand ended it.
    conversation = _cut_chat(user, fake)
    seen = send_stopped_elsewhere(user, conversation, "Tell me everything about the bikes.")

    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert (reply.status, reply.finish_reason) == (Message.Status.STOPPED, None)
    assert seen[-1]["data"]["message"]["finish_reason"] is None


def test_the_page_marks_the_cut_reply_and_offers_continue_on_the_latest_only(user, fake):
    conversation = _cut_chat(user, fake)
    send(user, conversation, "Tell me everything about the bikes in the shed.")
    send(user, conversation, "And the garage?")
    client = Client()
    client.force_login(user)

    page = client.get(f"/c/{conversation.pk}/").content.decode()

    assert page.count("Cut at output limit</span>") == 2
    assert page.count('data-action="continue" hidden>') == 1  # the older reply's Continue is hidden
    assert page.count('data-action="continue">') == 1
    listed = client.get(f"/api/conversations/{conversation.pk}/messages/").json()["results"]
    assert [m["finish_reason"] for m in listed] == [None, "length", None, "length"]


async def _read(chunks) -> str:
    return b"".join([chunk async for chunk in chunks]).decode()


def test_exports_carry_the_reason_and_an_import_of_the_json_keeps_it(user, fake):
    conversation = _cut_chat(user, fake)
    send(user, conversation, "Tell me everything about the bikes in the shed.")
    client = Client()
    client.force_login(user)

    response = client.get(f"/api/conversations/{conversation.pk}/export/?format=markdown")
    markdown = async_to_sync(_read)(response.streaming_content)
    assert "Assistant — " in markdown and "cut at the output limit" in markdown
    document = export_document(conversation)
    assert [m["finish_reason"] for m in document["messages"]] == [None, "length"]

    job = import_now(user, json.dumps(document).encode())
    assert job.status == "done", job.error
    copy = Conversation.objects.exclude(pk=conversation.pk).get(owner=user)
    assert list(copy.messages.order_by("id").values_list("finish_reason", flat=True)) == [None, "length"]

    # A file edited by hand gives one to the user's message: only a model's reply keeps it.
    document["messages"][0]["finish_reason"] = "length"
    record = conversation_parse(document, index=0)
    assert [m.extra["finish_reason"] for m in record.messages] == ["", "length"]


def test_continue_sends_the_cut_reply_back_so_the_model_can_go_on(user, fake):
    # The page's Continue is a message of its own; what makes it work is that the cut reply is sent as it went.
    conversation = _cut_chat(user, fake)
    send(user, conversation, "Tell me everything about the bikes in the shed.")
    cut = Message.objects.get(conversation=conversation, role="assistant").content

    send(user, conversation, "Continue exactly where your last reply stopped.")

    sent = fake.completions[-1].messages
    assert [m["content"] for m in sent if m["role"] == "assistant"] == [cut]
    assert sent[-1] == {"role": "user", "content": "Continue exactly where your last reply stopped."}


CONTINUE_WORDS = "Continue exactly where your last reply stopped."


def _continue(user, conversation: Conversation, parent):
    return post_stream(user, f"/api/conversations/{conversation.pk}/messages/",
                       {"content": CONTINUE_WORDS, "parent": parent})


def test_continue_from_a_page_left_behind_is_refused_and_sends_nothing(user, fake):
    # Two tabs show the cut reply; one continues it. Continue in the other appended a second "Continue"
    # after the first's answer: the model was asked to go on from a reply that was not the cut one.
    conversation = _cut_chat(user, fake)
    send(user, conversation, "Tell me everything about the bikes in the shed.")
    cut = Message.objects.get(conversation=conversation, role="assistant")
    assert _continue(user, conversation, cut.pk).names[-1] == "done"  # the first tab
    asked = len(fake.completions)

    stale = _continue(user, conversation, cut.pk)  # the tab left behind

    assert stale.status == 409, stale.body
    assert "another tab" in stale.body["detail"]
    assert Message.objects.filter(conversation=conversation, content=CONTINUE_WORDS).count() == 1
    assert len(fake.completions) == asked
    conversation.refresh_from_db()
    assert (conversation.live_message_count, conversation.turn_claimed_at) == (4, None)
    # The chat is free: the reply now last can be continued.
    newest = Message.objects.filter(conversation=conversation, role="assistant").latest("id")
    assert _continue(user, conversation, newest.pk).names[-1] == "done"


@pytest.mark.parametrize("parent", ["twelve", True, 1.5, [1], 0])
def test_a_parent_that_is_not_a_message_id_is_a_400(user, fake, parent):
    conversation = _cut_chat(user, fake)
    refused = _continue(user, conversation, parent)
    assert refused.status == 400 and "parent" in refused.body
    assert not Message.objects.filter(conversation=conversation).exists()
