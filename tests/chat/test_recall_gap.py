"""Recall's "…" marks a gap in the conversation, not a gap in the database's ids (which other chats and
hidden branches interleave)."""

from __future__ import annotations

import pytest
from django.db import transaction

from chatapp.chat.branch_services import branch_hide
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation
from chatapp.chat.recall_source import DatabaseRecallSource
from optimizer.recall import GAP, recall

pytestmark = pytest.mark.django_db

FILLER = [f"filler message {i} about gardening tomatoes and basil" for i in range(12)]
QUESTION = "Which port does the Zanzibar proxy listen on?"
ANSWER = "The Zanzibar proxy listens on port 8443."


def _say(conversation, texts, first_role="user"):
    roles = ("user", "assistant") if first_role == "user" else ("assistant", "user")
    return [message_append(conversation=conversation, role=roles[i % 2], content=t) for i, t in enumerate(texts)]


def _block(conversation):
    block = recall(text="What was the Zanzibar proxy port again?",
                   source=DatabaseRecallSource(conversation=conversation), room=2000, exclude_ids=frozenset(),
                   model="gpt-4o-mini")
    assert block is not None
    return block


def _assert_answer_follows_question(block, q, a):
    assert str(q.pk) in block.source_ids and str(a.pk) in block.source_ids
    lines = block.content.splitlines()
    i = lines.index(f"user: {q.content}")
    # The two are neighbours in the conversation (nothing recallable between them): no gap marker.
    assert lines[i + 1] == f"assistant: {a.content}", block.content
    assert GAP not in lines[i - 1 : i + 3]


def test_no_gap_between_question_and_answer_when_another_chat_wrote_in_between(user, other_user):
    mine = Conversation.objects.create(owner=user, title="Mine", offline=True)
    theirs = Conversation.objects.create(owner=other_user, title="Theirs", offline=True)
    _say(mine, FILLER[:6])
    q = message_append(conversation=mine, role="user", content=QUESTION)
    # Another user's chat writes while my reply is being produced: ids are global.
    message_append(conversation=theirs, role="user", content="hello from another chat")
    a = message_append(conversation=mine, role="assistant", content=ANSWER)
    _say(mine, FILLER[6:])
    _assert_answer_follows_question(_block(mine), q, a)


def test_no_gap_between_question_and_a_regenerated_answer(user):
    mine = Conversation.objects.create(owner=user, title="Mine", offline=True)
    _say(mine, FILLER[:6])
    q = message_append(conversation=mine, role="user", content=QUESTION)
    first = message_append(conversation=mine, role="assistant", content="Let me think about proxies.")
    with transaction.atomic():  # Regenerate: the first reply goes to another branch
        branch_hide(conversation_id=mine.pk, start_id=first.pk)
    a = message_append(conversation=mine, role="assistant", content=ANSWER)
    _say(mine, FILLER[6:])
    _assert_answer_follows_question(_block(mine), q, a)


def test_no_gap_between_two_exchanges_that_meet_when_another_chat_wrote_in_between(user, other_user):
    mine = Conversation.objects.create(owner=user, title="Mine", offline=True)
    theirs = Conversation.objects.create(owner=other_user, title="Theirs", offline=True)
    _say(mine, FILLER[:6])
    q = message_append(conversation=mine, role="user", content=QUESTION)
    reply = message_append(conversation=mine, role="assistant", content="Let me look that up for you.")
    message_append(conversation=theirs, role="user", content="hello from another chat")  # ids are global
    follow = message_append(conversation=mine, role="user", content="Take your time, no hurry.")
    a = message_append(conversation=mine, role="assistant", content=ANSWER)
    _say(mine, FILLER[6:])
    block = _block(mine)
    # Two hits (the question and the answer), each quoted with its neighbours: the reply ends the first
    # exchange and the follow-up opens the second; they are neighbours in the conversation.
    assert {str(m.pk) for m in (q, reply, follow, a)} <= set(block.source_ids)
    lines = block.content.splitlines()
    i = lines.index(f"assistant: {reply.content}")
    assert lines[i + 1] == f"user: {follow.content}", block.content
