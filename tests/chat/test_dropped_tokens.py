"""The tokens a turn dropped are summed once per set of dropped ranges, not on every turn."""

from __future__ import annotations

import pytest
from django.db.models import Q, Sum

from chatapp.chat.models import Conversation, Message
from chatapp.chat.record_finish import dropped_tokens_sum
from tests.support.chat import seed_messages

pytestmark = pytest.mark.django_db


def _expected(conversation: Conversation, ranges: list[list[int]]) -> int:
    within = Q()
    for first, last in ranges:
        within |= Q(id__gte=first, id__lte=last)
    live = Message.objects.filter(within, conversation=conversation, kind="chat", status="complete", superseded=False)
    return live.aggregate(total=Sum("token_count"))["total"] or 0


def test_the_sum_is_read_again_from_the_cache_until_the_ranges_change(
    user, conversation, django_assert_num_queries
):
    ids = seed_messages(conversation, 60)
    Message.objects.filter(pk=ids[7]).update(superseded=True)  # not live: never counted
    ranges = [[ids[1], ids[30]]]
    first = dropped_tokens_sum(conversation_id=conversation.pk, ranges=ranges)
    assert first == _expected(conversation, ranges) > 0
    with django_assert_num_queries(0):  # the next turn drops the same ranges: no sum over them again
        assert dropped_tokens_sum(conversation_id=conversation.pk, ranges=ranges) == first
    # The window moved (or a message was pinned out of the ranges): other ranges, summed afresh.
    moved = [[ids[1], ids[9]], [ids[11], ids[40]]]
    assert dropped_tokens_sum(conversation_id=conversation.pk, ranges=moved) == _expected(conversation, moved) != first
    assert dropped_tokens_sum(conversation_id=conversation.pk, ranges=[]) == 0


def test_for_a_real_model_the_demo_replies_in_the_ranges_are_not_counted(user, conversation):
    """A real model is never sent the offline demo's replies, so it does not drop them either."""
    ids = seed_messages(conversation, 20)
    demo = Message.objects.filter(pk__in=ids[1:10:2], role="assistant")
    assert demo.update(model="offline-demo") == 5
    ranges = [[ids[0], ids[19]]]
    demo_tokens = sum(demo.values_list("token_count", flat=True))
    everything = dropped_tokens_sum(conversation_id=conversation.pk, ranges=ranges)
    assert everything == _expected(conversation, ranges)
    real = dropped_tokens_sum(conversation_id=conversation.pk, ranges=ranges, offline_replies=False)
    assert real == everything - demo_tokens and demo_tokens > 0


def test_a_turn_with_quotes_records_the_tokens_of_its_stored_ranges(user, conversation, fake_openai):
    """The quoted messages are cut out of the record's ranges; the tokens it records are still exactly
    the live tokens of those ranges (summed as the ranges before the cut, less the quotes' counts)."""
    from chatapp.chat.models import OptimizationRecord
    from chatapp.chat.search_services import conversation_index_rebuild
    from tests.support.chat import send
    from tests.support.recall import QUESTION, seed_with_fact

    ids = seed_with_fact(conversation)
    Message.objects.filter(pk=ids[3]).update(superseded=True)  # left out, and not live: never counted
    conversation_index_rebuild(conversation=conversation)
    for text in (QUESTION, "And the chatter11 chatter16 notes, what did they say?"):
        result = send(user, conversation, text)
        assert result.names[-1] == "done", result.events
        record = OptimizationRecord.objects.get(reply_id=result.named("done")[0]["message"]["id"])
        quoted = [i for entry in record.sent if entry["origin"] == "recall" for i in entry["source_ids"]]
        assert quoted and min(quoted) < ids[16]  # quotes from below the window, cut out of the ranges
        assert not any(first <= pk <= last for pk in quoted for first, last in record.dropped_ranges)
        assert record.dropped_tokens == _expected(conversation, record.dropped_ranges) > 0
