"""The app takes the static layer / window rule from the core (optimizer.layout), never re-derives it.

Every adapter is checked against `optimizer.layout.message_place` / `is_static` on one conversation
where each part of the rule matters (tests/support/layout.py): the query form of the static layer,
what a request loads as static, the summary job's span, the timeline page and the stream's payload.
"""

from __future__ import annotations

import re

import pytest

from chatapp.chat.chat_turn import chat_turn_start, turn_pack
from chatapp.chat.context import context_load, first_user_message_id
from chatapp.chat.layout import message_place_get, row_is_static, static_layer_q
from chatapp.chat.models import Message, SummaryJob
from chatapp.chat.summary_services import _span_bounds
from chatapp.chat.summary_writing import span_plan
from chatapp.chat.turn_claim import turn_claim_release
from optimizer.layout import is_static
from optimizer.types import SummarySpan
from tests.support.layout import expected_places, make_layout_conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def layout(user):
    return make_layout_conversation(owner=user)


def _live(layout) -> list[Message]:
    return [m for m in layout.messages if m.kind == Message.Kind.CHAT and m.status in Message.LIVE_STATUSES
            and not m.superseded]


def test_first_user_message_is_the_first_live_user_message(layout):
    # an assistant greeting comes first: the first *user* message is the third row
    assert first_user_message_id(conversation=layout.conversation) == layout.messages[2].pk


def test_static_layer_query_selects_what_is_static_accepts(layout):
    first_user_id = first_user_message_id(conversation=layout.conversation)
    selected = set(
        Message.objects.filter(static_layer_q(first_user_id=first_user_id, conversation=layout.conversation))
        .filter(kind=Message.Kind.CHAT)
        .values_list("id", flat=True)
    )
    expected = {m.pk for m in layout.messages if m.kind == Message.Kind.CHAT
                and is_static(role=m.role, pinned=m.pinned, is_first_user=m.pk == first_user_id)}
    assert selected == expected
    assert {m.pk for m in layout.messages if m.kind == Message.Kind.CHAT
            and row_is_static(pk=m.pk, role=m.role, pinned=m.pinned, first_user_id=first_user_id)} == expected


def test_context_load_takes_the_static_layer_and_window_from_the_core(layout):
    places = expected_places(layout)
    ctx = context_load(conversation=layout.conversation)
    live = _live(layout)
    assert ctx.static_ids == {m.pk for m in live if places[m.pk] == "static" and m.pk < layout.window_start_id}
    # loaded: the static layer and the window, never an evicted message
    assert set(ctx.loaded_ids) == {m.pk for m in live if places[m.pk] in {"static", "window"}}
    assert ctx.window_start == str(layout.window_start_id)


def test_summary_span_is_the_evicted_messages_the_core_names(layout):
    places = expected_places(layout)
    previous = next(m for m in layout.messages if m.kind == Message.Kind.SUMMARY)
    plan = span_plan(job=SummaryJob(conversation=layout.conversation, trigger=SummaryJob.Trigger.AUTO),
                      conversation=layout.conversation)
    assert plan is not None
    expected = [m.pk for m in _live(layout) if previous.covers_through_id < m.pk and places[m.pk] == "evicted"]
    assert [m.pk for m in plan.rows] == expected
    # the planned span starts at the first evicted message, not at a static one
    first, _ = _span_bounds(conversation=layout.conversation,
                            span=SummarySpan(after_id=None, through_id=str(layout.window_start_id - 1)))
    assert first == next(m.pk for m in _live(layout) if places[m.pk] == "evicted")


def test_message_place_get_is_the_core_rule(layout):
    places = expected_places(layout)
    first_user_id = first_user_message_id(conversation=layout.conversation)
    for m in layout.messages:
        got = message_place_get(message=m, first_user_id=first_user_id, window_start_id=layout.window_start_id)
        assert got == places[m.pk], m.content


def test_timeline_marks_each_message_with_the_core_place(client, user, layout):
    places = expected_places(layout)
    client.force_login(user)
    body = client.get(f"/c/{layout.conversation.pk}/").content.decode()
    for m in layout.messages:
        if m.kind == Message.Kind.SUMMARY:
            continue
        tag = re.search(rf'<article class="([^"]*)"\s+id="m-{m.pk}"[^>]*>', body)
        if m.superseded:
            # Issue 13 (branches): a replaced reply is another branch, reached by "n/m", not in the path shown.
            assert tag is None, m.content
            continue
        assert tag is not None, m.content
        place = re.search(r'data-place="(\w+)"', tag.group(0))
        assert (place.group(1) if place else None) == places[m.pk], m.content
        # what the page greys out is exactly what the core evicts
        assert ("is-outside" in tag.group(1).split()) == (places[m.pk] == "evicted"), m.content


def test_earlier_page_fragment_marks_places_too(client, user, layout):
    places = expected_places(layout)
    client.force_login(user)
    before = layout.messages[-1].pk
    body = client.get(f"/c/{layout.conversation.pk}/messages/?before={before}").content.decode()
    marked = dict(re.findall(r'data-id="(\d+)"[^>]*?data-place="(\w+)"', body))
    assert marked == {str(pk): p for pk, p in places.items() if p is not None and pk < before}


def test_stream_payload_carries_the_core_place(user, conversation):
    first = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content="hello there"))
    assert first.user_message["place"] == "static"  # the first user message is always sent
    # What the end of its stream does: the reply stored, the conversation's claim given back.
    Message.objects.filter(pk=first.reply_id).update(status=Message.Status.COMPLETE, content="hi")
    turn_claim_release(conversation_id=conversation.pk, claimed_at=first.claimed_at)
    conversation.refresh_from_db()
    second = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content="and then?"))
    assert second.user_message["place"] == "window"
