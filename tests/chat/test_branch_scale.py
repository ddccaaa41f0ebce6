"""A version switched far up a long chat moves thousands of messages on or off the path: the index of
them all is brought in step in batches (of a few hundred rows), not with statements of its own each."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatapp.chat.branch_services import branch_hide, branch_show
from chatapp.chat.models import Conversation, Message, MessageSearch, RecallCorpus, RecallTerm
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


def _index_state(conversation: Conversation) -> tuple:
    rows = sorted(MessageSearch.objects.filter(conversation=conversation).values_list(
        "message_id", "scope", "terms", "length", "recallable"))
    terms = sorted(RecallTerm.objects.filter(conversation=conversation, df__gt=0).values_list("term", "df"))
    corpus = list(RecallCorpus.objects.filter(conversation=conversation).values_list("docs", "length"))
    return rows, terms, corpus


def test_the_index_after_switches_is_the_one_a_rebuild_makes(user):
    """A switch brings the index in step from the rows' stored terms (the text is not analysed again):
    every row's scope and flag, each term's document frequency and the corpus are what indexing the
    chat from scratch gives, with a message stopped half-way (not recallable) among those that move."""
    conversation = Conversation.objects.create(owner=user, title="versions")
    ids = seed_messages(conversation, 30, words=8)
    Message.objects.filter(pk=ids[5]).update(status=Message.Status.ERROR)
    conversation_index_rebuild(conversation=conversation)
    branch_hide(conversation_id=conversation.pk, start_id=ids[4])
    hidden = _index_state(conversation)
    conversation_index_rebuild(conversation=conversation)
    assert _index_state(conversation) == hidden

    branch_show(conversation_id=conversation.pk, start_id=ids[4])
    shown = _index_state(conversation)
    conversation_index_rebuild(conversation=conversation)
    assert _index_state(conversation) == shown
