"""The dashboard's summaries, newest first, page by key: a summary written while the page is open (a
turn in another tab) shifted the next page of offsets, and "Show more" listed one summary twice."""

from __future__ import annotations

import pytest

from tests.dashboard.factories import make_conversation, make_message, make_summary

pytestmark = pytest.mark.django_db


def _summaries(conversation, n: int) -> list:
    made = []
    for i in range(n):
        said = [make_message(conversation=conversation, content=f"m{i}.{k}") for k in range(2)]
        made.append(make_summary(conversation=conversation, covers=(said[0], said[1]), covered=2, content=f"[S{i}]"))
    return made


def _url(pk: int) -> str:
    return f"/api/dashboard/conversations/{pk}/summaries/"


def _ids(page: dict) -> list[int]:
    return [s["id"] for s in page["results"]]


def test_a_summary_written_between_pages_is_not_listed_twice(owner_client, user):
    chat = make_conversation(owner=user)
    older_first = _summaries(chat, 4)
    newest_first = [s.pk for s in reversed(older_first)]
    first = owner_client.get(_url(chat.pk), {"limit": 2}).json()
    assert _ids(first) == newest_first[:2] and first["count"] == 4
    _summaries(chat, 1)  # a worker writes one more
    second = owner_client.get(first["next"]).json()
    assert _ids(second) == newest_first[2:] and second["next"] is None
    assert second["count"] == 5  # the summaries the chat holds at this read


def test_before_is_the_page_just_older_than_that_summary(owner_client, user):
    chat = make_conversation(owner=user)
    newest_first = [s.pk for s in reversed(_summaries(chat, 3))]
    page = owner_client.get(_url(chat.pk), {"limit": 5, "before": newest_first[0]}).json()
    assert _ids(page) == newest_first[1:] and page["next"] is None


@pytest.mark.parametrize("query", [{"before": "x"}, {"before": 0}, {"before": 5, "offset": 1}])
def test_a_bad_before_or_one_beside_an_offset_is_a_400(owner_client, user, query):
    chat = make_conversation(owner=user)
    answer = owner_client.get(_url(chat.pk), query)
    assert answer.status_code == 400 and set(answer.json()) & {"before", "offset"}
