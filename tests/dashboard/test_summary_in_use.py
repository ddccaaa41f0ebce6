"""The summaries list names the summary in use: the one the next request sends (the newest summary
neither discarded nor on another branch, as context_load reads it), which is also the only one an
edit may replace."""

from __future__ import annotations

import pytest

from chatapp.chat.branch_services import branch_hide
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Message
from tests.dashboard.factories import make_conversation, make_summary

pytestmark = pytest.mark.django_db


def _say(conversation, i: int) -> Message:
    return message_append(conversation=conversation, role=("user", "assistant")[i % 2], content=f"message {i}",
                          token_model="gpt-4o-mini")


def _summaries(client, pk: int) -> list[dict]:
    return client.get(f"/api/dashboard/conversations/{pk}/summaries/").json()["results"]


def test_a_summary_on_another_branch_is_not_the_one_in_use(owner_client, user):
    c = make_conversation(owner=user)
    m = [_say(c, i) for i in range(10)]
    first = make_summary(conversation=c, covers=(m[0], m[3]), covered=4, content="[Summary] up to 4")
    later = make_summary(conversation=c, covers=(m[0], m[7]), covered=8, content="[Summary] up to 8")
    # An edit of message 7 (what the edit's turn runs): the path from it on, and the later summary
    # covering it, go to another branch. Neither summary is discarded.
    branch_hide(conversation_id=c.pk, start_id=m[6].pk)
    assert Message.objects.get(pk=later.pk).superseded

    rows = {row["id"]: row for row in _summaries(owner_client, c.pk)}
    assert {pk: row["in_use"] for pk, row in rows.items()} == {later.pk: False, first.pk: True}
    assert {pk: row["on_active_path"] for pk, row in rows.items()} == {later.pk: False, first.pk: True}
    # what "in use" means: the one an edit may replace (the page offers Edit on it only)
    edit = owner_client.patch(f"/api/summaries/{later.pk}/", {"content": "[Summary] edited"},
                              content_type="application/json")
    assert edit.status_code >= 400
    edit = owner_client.patch(f"/api/summaries/{first.pk}/", {"content": "[Summary] edited"},
                              content_type="application/json")
    assert edit.status_code == 200, edit.content

    # the edit is now in use; the version it replaced is discarded, and no longer in use
    rows = {row["id"]: row for row in _summaries(owner_client, c.pk)}
    assert [pk for pk, row in rows.items() if row["in_use"]] == [edit.json()["id"]]
    assert rows[first.pk]["discarded"] and not rows[first.pk]["in_use"]


def test_without_a_summary_left_on_the_path_none_is_in_use(owner_client, user):
    c = make_conversation(owner=user)
    m = [_say(c, i) for i in range(6)]
    make_summary(conversation=c, covers=(m[0], m[3]), covered=4, content="[Summary] up to 4")
    branch_hide(conversation_id=c.pk, start_id=m[2].pk)
    rows = _summaries(owner_client, c.pk)
    assert len(rows) == 1
    assert rows[0]["in_use"] is False and rows[0]["on_active_path"] is False and rows[0]["discarded"] is False
