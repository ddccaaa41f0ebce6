"""A version switched far up a long chat moves thousands of messages on or off the path: the index of
them all is brought in step in batches (of a few hundred rows), not with statements of its own each."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatapp.chat.branch_services import branch_hide, branch_show
from chatapp.chat.models import Conversation
from chatapp.chat.search_services import conversation_index_rebuild
from tests.support.branches import assert_path_consistent
from tests.support.chat import seed_messages


def _statements(user, count: int) -> tuple[int, int]:
    """Statements run to take a chat of `count` messages off its path from its second one, and back."""
    conversation = Conversation.objects.create(owner=user, title=f"{count} messages")
    ids = seed_messages(conversation, count, words=8)
    conversation_index_rebuild(conversation=conversation)
    connection.queries_log.clear()  # a log of at most 9,000: full, it would count nothing
    with CaptureQueriesContext(connection) as hide:
        assert branch_hide(conversation_id=conversation.pk, start_id=ids[1]) == count - 1
    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as show:
        assert branch_show(conversation_id=conversation.pk, start_id=ids[1]) == count - 1
    assert_path_consistent(conversation)
    return len(hide), len(show)


def test_a_switch_far_up_costs_the_statements_of_a_short_one(user):
    # It used to cost four statements a message (a savepoint, a read and a write of its index row):
    # 48,000 and about 7 s for a switch at the top of a 12,000-message chat.
    short, long = _statements(user, 40), _statements(user, 1200)
    assert all(many <= few + 1200 // 100 for many, few in zip(long, short, strict=True)), (long, short)
