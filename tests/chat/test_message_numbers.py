"""Users number messages by position (1-based, chat messages only); database ids never show
(issue 14, finding 5). Summaries are numbered apart, in their own order."""

from __future__ import annotations

import pytest

from chatapp.chat.models import Conversation, Message
from chatapp.chat.selectors import message_numbers, summary_numbers

pytestmark = pytest.mark.django_db


def _chat(conversation: Conversation, n: int) -> list[Message]:
    return [Message.objects.create(conversation=conversation, role="user" if k % 2 == 0 else "assistant",
                                   content=f"message {k}") for k in range(n)]


def test_positions_skip_summaries_and_other_conversations(user, conversation):
    other = Conversation.objects.create(owner=user)
    first = _chat(conversation, 3)
    _chat(other, 4)  # interleaved ids from another conversation
    summary = Message.objects.create(conversation=conversation, role="system", kind="summary", content="s")
    later = _chat(conversation, 2)

    numbers = message_numbers(conversation_id=conversation.pk, ids=[m.pk for m in first + later])

    assert [numbers[m.pk] for m in first + later] == [1, 2, 3, 4, 5]
    # a summary's id maps to the message before it (it has no number of its own)
    assert message_numbers(conversation_id=conversation.pk, ids=[summary.pk]) == {summary.pk: 3}
    assert message_numbers(conversation_id=conversation.pk, ids=[]) == {}


def test_summaries_are_numbered_in_their_own_order(user, conversation):
    _chat(conversation, 2)
    a = Message.objects.create(conversation=conversation, role="system", kind="summary", content="a")
    _chat(conversation, 2)
    b = Message.objects.create(conversation=conversation, role="system", kind="summary", content="b",
                               discarded=True)
    assert summary_numbers(conversation_id=conversation.pk) == {a.pk: 1, b.pk: 2}
