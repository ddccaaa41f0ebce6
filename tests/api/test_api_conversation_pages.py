"""The conversation list's pages while the list changes: a client following `next` sees every chat that
did not change exactly once (offset pages shifted under it: one chat skipped or one shown twice)."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.utils import timezone

from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation

pytestmark = pytest.mark.django_db


def _chats(make_conversation, user, n: int) -> list[Conversation]:
    """`n` chats, the first the most recently active (one second apart: the list's order is known)."""
    now = timezone.now()
    chats = [make_conversation(user, title=f"c{i}") for i in range(n)]
    for i, chat in enumerate(chats):
        Conversation.objects.filter(pk=chat.pk).update(updated_at=now - timedelta(seconds=i))
    return chats


def _ids(page: dict) -> list[int]:
    return [c["id"] for c in page["results"]]


def test_a_chat_with_a_new_message_between_pages_repeats_no_other_chat(api, user, make_conversation):
    chats = _chats(make_conversation, user, 6)
    first = api.get("/api/conversations/", {"limit": 3}).json()
    assert _ids(first) == [c.pk for c in chats[:3]]
    # A reply lands in the fifth chat (another tab, another device): it moves to the top of the list.
    message_append(conversation=chats[4], role="user", content="back to this one")
    second = api.get(first["next"]).json()
    # Offset paging answered c2 again (it shifted down one place) beside c3 and c5.
    assert _ids(second) == [chats[3].pk, chats[5].pk]
    assert second["next"] is None


def test_a_chat_deleted_between_pages_skips_no_other_chat(api, user, make_conversation):
    chats = _chats(make_conversation, user, 6)
    first = api.get("/api/conversations/", {"limit": 3}).json()
    api.delete(f"/api/conversations/{chats[0].pk}/")
    second = api.get(first["next"]).json()
    # Offset paging skipped c3 (it shifted up onto the first page, already read).
    assert _ids(second) == [c.pk for c in chats[3:]]


def test_a_chat_created_between_pages_repeats_none(api, user, make_conversation):
    chats = _chats(make_conversation, user, 4)
    first = api.get("/api/conversations/", {"limit": 2}).json()
    assert api.post("/api/conversations/", {"title": "new"}, format="json").status_code == 201
    second = api.get(first["next"]).json()
    assert _ids(second) == [c.pk for c in chats[2:]]


def test_chats_active_at_the_same_instant_are_each_listed_once(api, user, make_conversation):
    # The cursor holds the last chat's time and id: a tie at the page's edge is neither cut nor repeated.
    chats = [make_conversation(user, title=f"c{i}") for i in range(5)]
    Conversation.objects.filter(owner=user).update(updated_at=timezone.now())
    seen: list[int] = []
    page = api.get("/api/conversations/", {"limit": 2}).json()
    while True:
        seen += _ids(page)
        assert page["count"] == 5
        if page["next"] is None:
            break
        page = api.get(page["next"]).json()
    assert seen == sorted((c.pk for c in chats), reverse=True)


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def test_a_cursor_not_given_by_the_list_is_a_400_naming_it(api, user, make_conversation):
    make_conversation(user)
    # The last two are times whose offset puts them outside the years a date can hold once in UTC.
    made_up = [_cursor(t) for t in ("123|abc", "2026-12-04T15:02:14|5", "2026-12-04T15:02:14+00:00|0", "|5",
                                    "2026-12-04T15:02:14+00:00|", "0001-01-01T00:00:00+01:00|5",
                                    "9999-12-31T23:59:59-01:00|5")]
    for bad in ("nonsense", "x" * 300, *made_up):
        answer = api.get("/api/conversations/", {"cursor": bad})
        assert answer.status_code == 400, bad
        assert "cursor" in answer.json() and answer.json()["detail"].startswith("cursor")
    # empty: the first page, as an empty offset was
    assert api.get("/api/conversations/", {"cursor": ""}).status_code == 200


def test_a_cursor_with_an_offset_is_a_400(api, user, make_conversation):
    _chats(make_conversation, user, 3)
    first = api.get("/api/conversations/", {"limit": 1}).json()
    answer = api.get(first["next"] + "&offset=1")
    assert answer.status_code == 400 and "offset" in answer.json()


def test_an_offset_still_starts_the_list_there_and_its_next_is_a_cursor(api, user, make_conversation):
    # Clients written for offset pages keep working: the offset places the first page, `next` follows on by key.
    chats = _chats(make_conversation, user, 5)
    page = api.get("/api/conversations/", {"limit": 2, "offset": 1}).json()
    assert _ids(page) == [chats[1].pk, chats[2].pk]
    assert "offset=" not in page["next"] and "cursor=" in page["next"]
    assert _ids(api.get(page["next"]).json()) == [chats[3].pk, chats[4].pk]


def test_search_and_archived_filters_keep_their_pages(api, user, make_conversation):
    chats = _chats(make_conversation, user, 5)
    for chat in chats[1::2]:
        api.patch(f"/api/conversations/{chat.pk}/", {"archived": True}, format="json")
    page = api.get("/api/conversations/", {"limit": 1, "archived": "false"}).json()
    seen = _ids(page)
    while page["next"]:
        assert "archived=false" in page["next"]
        page = api.get(page["next"]).json()
        seen += _ids(page)
    assert seen == [chats[0].pk, chats[2].pk, chats[4].pk]


# --- The other lists newest first: a row made (or revoked) between two pages shifted the next one ---------


def test_an_import_started_between_pages_repeats_no_job(api, user):
    from chatapp.chat.import_models import ImportJob

    jobs = [ImportJob.objects.create(owner=user, filename=f"f{i}.json") for i in range(4)][::-1]
    first = api.get("/api/imports/", {"limit": 2}).json()
    assert _ids(first) == [j.pk for j in jobs[:2]]
    ImportJob.objects.create(owner=user, filename="new.json")  # another tab's upload
    second = api.get(first["next"]).json()
    assert _ids(second) == [j.pk for j in jobs[2:]] and second["next"] is None


def test_a_link_revoked_between_pages_skips_no_other_link(api, user, make_conversation):
    chat = make_conversation(user)
    links = [api.post(f"/api/conversations/{chat.pk}/share/").json()["id"] for _ in range(4)][::-1]
    first = api.get("/api/shares/", {"limit": 2}).json()
    assert _ids(first) == links[:2]
    assert api.delete(f"/api/shares/{links[0]}/").status_code == 204
    assert _ids(api.get(first["next"]).json()) == links[2:]


def test_a_summary_job_made_between_pages_repeats_no_job(api, user, make_conversation):
    from chatapp.chat.models import SummaryJob

    chat = make_conversation(user)
    done = SummaryJob.Status.DONE
    jobs = [SummaryJob.objects.create(conversation=chat, status=done) for _ in range(4)][::-1]
    url = f"/api/conversations/{chat.pk}/summary-jobs/"
    first = api.get(url, {"limit": 2}).json()
    SummaryJob.objects.create(conversation=chat, status=done)
    second = api.get(first["next"]).json()
    assert _ids(second) == [j.pk for j in jobs[2:]] and "quota_remaining" in second
