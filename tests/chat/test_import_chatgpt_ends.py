"""How a ChatGPT reply ended comes in with it: one the user stopped ("finish_details": {"type":
"interrupted"}) is a stopped reply here, one cut at the model's output limit ("max_tokens") a reply cut
at the output limit, as either would be had it been written here."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from chatapp.chat.imports import chatgpt
from chatapp.chat.imports.records import record_fingerprint
from chatapp.chat.models import Conversation, Message
from tests.chat.importkit import chatgpt_conversation, import_now

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user(username="gpt-ends", password="a long test password 9")


def test_a_chatgpt_reply_stopped_or_cut_comes_in_stopped_or_cut(owner):
    conversation = chatgpt_conversation(1, messages=6)
    ends = {"n1": {"type": "interrupted", "reason": "client_stopped"}, "n3": {"type": "max_tokens"},
            "n5": {"type": "stop", "stop_tokens": [200002]}}
    for node, finish in ends.items():
        conversation["mapping"][node]["message"]["metadata"]["finish_details"] = finish

    job = import_now(owner, json.dumps([conversation]).encode())

    assert job.status == "done", job.error
    chat = Conversation.objects.get(pk=job.conversation_ids[0])
    replies = list(chat.messages.filter(role=Message.Role.ASSISTANT).order_by("id"))
    assert [(m.status, m.finish_reason) for m in replies] == [("stopped", None), ("complete", "length"),
                                                              ("complete", None)]
    page = Client()
    page.force_login(owner)
    body = page.get(f"/c/{chat.pk}/").content.decode()
    assert body.count(">Stopped</span>") == 1 and body.count(">Cut at output limit</span>") == 1


def test_a_chat_imported_before_its_stop_was_read_is_not_imported_again(owner):
    # The fingerprint (import again: only what is new) reads a stopped reply as the import read it
    # before, complete: the same file imported then is recognised, not imported a second time.
    conversation = chatgpt_conversation(2, messages=2)
    before = json.loads(json.dumps(conversation))
    conversation["mapping"]["n1"]["message"]["metadata"]["finish_details"] = {"type": "interrupted"}
    assert record_fingerprint(chatgpt.conversation_parse(conversation, index=0)) == record_fingerprint(
        chatgpt.conversation_parse(before, index=0))

    import_now(owner, json.dumps([conversation]).encode())
    again = import_now(owner, json.dumps([conversation]).encode())

    assert (again.status, again.conversation_ids, again.duplicates) == ("done", [], 1)


def test_a_chatgpt_reasoning_models_thoughts_come_in_as_its_replys_thinking(owner):
    # ChatGPT keeps a reasoning model's thinking in nodes of their own above the reply: its thoughts
    # ("content_type": "thoughts") and a "Thought for 12s" label ("reasoning_recap"). Both were dropped
    # and counted as "2 with no text" messages not imported, the thinking lost.
    conversation = chatgpt_conversation(3, messages=2)
    mapping = conversation["mapping"]
    thought = {"id": "t", "parent": "n0", "children": ["recap"], "message": {
        "id": "t", "author": {"role": "assistant"}, "create_time": 1_700_003_000.5, "metadata": {},
        "content": {"content_type": "thoughts", "source_analysis_msg_id": "x", "thoughts": [
            {"summary": "Weighing the routes", "content": "The coast road is longer but flat.", "chunks": [],
             "finished": True},
            {"summary": "Searched 3 websites", "content": "", "chunks": [], "finished": True}]}}}
    recap = {"id": "recap", "parent": "t", "children": ["n1"], "message": {
        "id": "recap", "author": {"role": "assistant"}, "create_time": 1_700_003_000.7, "metadata": {},
        "content": {"content_type": "reasoning_recap", "content": "Thought for 12s"}}}
    mapping.update({"t": thought, "recap": recap})
    mapping["n0"]["children"] = ["t"]
    mapping["n1"]["parent"] = "recap"

    job = import_now(owner, json.dumps([conversation]).encode())

    assert job.status == "done", job.error
    chat = Conversation.objects.get(pk=job.conversation_ids[0])
    assert [(m.role, m.reasoning) for m in chat.messages.order_by("id")] == [
        ("user", None),
        ("assistant", "Weighing the routes\nThe coast road is longer but flat.\n\nSearched 3 websites"),
    ]
    assert job.omitted == {}
