"""The API gives each message its place in the context, computed by the core (optimizer.layout), so
the browser and other clients never re-derive the static layer / window rule."""

from __future__ import annotations

import pytest

from chatapp.chat.models import Message
from tests.support.layout import expected_places, make_layout_conversation

pytestmark = pytest.mark.django_db


def test_message_list_places_equal_the_core_rule(api, user, django_assert_max_num_queries):
    layout = make_layout_conversation(owner=user)
    places = expected_places(layout)
    with django_assert_max_num_queries(8):  # the window facts are read once per page, not per message
        response = api.get(f"/api/conversations/{layout.conversation.pk}/messages/")
    assert response.status_code == 200
    got = {m["id"]: m["place"] for m in response.json()["results"]}
    # Issue 13 (branches): the list is the active path; a replaced reply is a branch, not listed.
    off_path = {m.pk for m in layout.messages if m.superseded}
    assert off_path
    assert got == {pk: place for pk, place in places.items() if pk not in off_path}


def test_pin_answer_carries_the_new_place(api, user):
    layout = make_layout_conversation(owner=user)
    places = expected_places(layout)
    evicted = next(m for m in layout.messages if places[m.pk] == "evicted")

    pinned = api.post(f"/api/messages/{evicted.pk}/pin/", {"pinned": True}, format="json").json()
    assert pinned["place"] == "static"  # a pin joins the static layer, whatever the window

    unpinned = api.post(f"/api/messages/{evicted.pk}/pin/", {"pinned": False}, format="json").json()
    assert unpinned["place"] == "evicted"


def test_summary_answer_has_no_place(api, user):
    layout = make_layout_conversation(owner=user)
    summary = next(m for m in layout.messages if m.kind == Message.Kind.SUMMARY)
    response = api.get(f"/api/summaries/{summary.pk}/")
    assert response.status_code == 200
    assert response.json()["place"] is None
