"""Checks of the message tree shared by the branch tests: the active path found the slow way, and that
the flags, running totals and recall statistics describe it."""

from __future__ import annotations

from django.db.models import Sum

from chatapp.chat.branch_selectors import path_tail_id
from chatapp.chat.context import live_chat_q
from chatapp.chat.models import Conversation, Message, MessageSearch, RecallCorpus


def active_path(conversation: Conversation) -> list[int]:
    """The active path found the slow way: parent pointers up from the tail."""
    tail = path_tail_id(conversation_id=conversation.pk)
    path = []
    while tail is not None:
        path.append(tail)
        tail = Message.objects.values_list("parent_id", flat=True).get(pk=tail)
    return path[::-1]


def assert_path_consistent(conversation: Conversation) -> None:
    """Flags, running totals and recall statistics all describe the active path, and nothing else."""
    path = active_path(conversation)
    chat = Message.objects.filter(conversation=conversation, kind="chat")
    assert sorted(chat.filter(superseded=False).values_list("id", flat=True)) == path
    conversation.refresh_from_db()
    live = chat.filter(live_chat_q(), id__in=path)
    assert conversation.live_message_count == live.count()
    assert conversation.live_token_count == (live.aggregate(t=Sum("token_count"))["t"] or 0)
    recallable = set(MessageSearch.objects.filter(conversation=conversation, recallable=True).values_list(
        "message_id", flat=True))
    assert recallable == set(live.filter(role__in=["user", "assistant"]).values_list("id", flat=True))
    corpus = RecallCorpus.objects.filter(conversation=conversation).first()
    assert (corpus.docs if corpus else 0) == len(recallable)
