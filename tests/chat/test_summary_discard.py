"""Discarding a summary discards that one only (with its edit chain), and the next request refits the
history instead of leaving what it covered neither sent nor summarized (issue 14, finding 3)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

import optimizer
from chatapp.chat import summary_services
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.chat.summary_selectors import summary_current
from chatapp.chat.summary_services import summary_discard, summary_edit
from tests.support.chat import make_config, post_stream, seed_messages, send
from tests.support.worker import wait_for

pytestmark = pytest.mark.django_db


def _summary(conversation: Conversation, *, through: int, first: int, text: str, **extra) -> Message:
    return message_append(
        conversation=conversation, role="system", kind="summary", content=f"[Conversation summary]\n\n{text}",
        covers_from_id=first, covers_through_id=through, **extra,
    )


def test_discarding_the_summary_in_use_keeps_the_older_one_and_refits_the_window(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=4_000, max_output=500)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    ids = seed_messages(conversation, 300, model="gpt-4o-mini")
    older = _summary(conversation, first=ids[1], through=ids[99], text="We chose PostgreSQL.")
    newer = _summary(conversation, first=ids[1], through=ids[199], text="We chose PostgreSQL and GIN.")
    edited = _summary(conversation, first=ids[1], through=ids[199], text="GIN, edited.",
                      edited=True, edited_from=newer)
    Message.objects.filter(pk=newer.pk).update(discarded=True)  # as an edit leaves the version it replaced
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[200])
    client = APIClient()
    client.force_authenticate(user)

    # discarding by the id shown before the edit: that summary's whole edit chain, nothing else
    response = client.delete(f"/api/summaries/{newer.pk}/")

    assert response.status_code == 200 and response.json()["discarded"] is True
    assert set(Message.objects.filter(kind="summary", discarded=True).values_list("id", flat=True)) == {
        newer.pk, edited.pk
    }
    conversation.refresh_from_db()
    assert conversation.window_start_id is None  # the next request refits the history
    fake_openai.reset()
    result = send(user, conversation, "Which database did we choose?")
    assert result.names[-1] == "done", result.events
    record = OptimizationRecord.objects.get(reply_id=result.named("start")[0]["assistant_message"]["id"])
    assert record.summary_id == older.pk  # the older summary takes its place again
    budget = optimizer.compute_budget(context_window=4_000, max_output_tokens=500)
    # the window is cut afresh to the target; what lies between the older summary and it is reported
    # dropped and queued for the next rolling summary, not silently skipped
    assert record.window_start_id > ids[200] and record.tokens_sent >= 0.45 * budget
    assert record.dropped_ranges == [[ids[100], record.window_start_id - 1]]
    assert record.stats["summary_needed"]
    assert "We chose PostgreSQL." in fake_openai.completions[-1].messages[0]["content"]


def test_discarding_a_replaced_summary_changes_nothing_sent(user, conversation):
    ids = seed_messages(conversation, 40)
    older = _summary(conversation, first=ids[1], through=ids[9], text="Old.")
    newer = _summary(conversation, first=ids[1], through=ids[19], text="New.")
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[20])
    client = APIClient()
    client.force_authenticate(user)

    assert client.delete(f"/api/summaries/{older.pk}/").status_code == 200

    assert Message.objects.get(pk=older.pk).discarded and not Message.objects.get(pk=newer.pk).discarded
    conversation.refresh_from_db()
    assert conversation.window_start_id == ids[20]


def test_discarding_stops_where_an_edit_chain_loops(user):
    """The walk down a summary's edits ended only when no edit was left: rows whose `edited_from` loop
    (no writer of the app makes them; a crafted import did) kept a request querying for ever."""
    conversation = Conversation.objects.create(owner=user)
    ids = seed_messages(conversation, 4, model="gpt-4o-mini")
    first = _summary(conversation, first=ids[0], through=ids[1], text="One.")
    second = _summary(conversation, first=ids[0], through=ids[1], text="Two.", edited=True, edited_from=first)
    Message.objects.filter(pk=first.pk).update(edited_from=second)

    summary_discard(summary=first)

    assert set(Message.objects.filter(kind="summary", discarded=True).values_list("id", flat=True)) == {
        first.pk, second.pk
    }


def test_a_summary_discarded_on_a_branch_not_shown_stays_discarded_when_the_branch_comes_back(user, conversation):
    """A tab left behind by an edit elsewhere still shows the summary and its Discard: the discard
    answered 200 with nothing done (`discarded` false), and the summary came back in use with its
    branch. It is discarded, as an unpin on such a version is taken."""
    ids = seed_messages(conversation, 40)
    summary = _summary(conversation, first=ids[1], through=ids[19], text="We chose MySQL.")
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[20])
    assert post_stream(user, f"/api/messages/{ids[10]}/edit/", {"content": "edited"}).names[-1] == "done"
    client = APIClient()
    client.force_authenticate(user)

    response = client.delete(f"/api/summaries/{summary.pk}/")

    assert response.status_code == 200 and response.json()["discarded"] is True
    assert client.post(f"/api/messages/{ids[10]}/branch/", {"index": 1}, format="json").status_code == 200
    result = send(user, conversation, "Which database did we choose?")
    assert result.names[-1] == "done", result.events
    record = OptimizationRecord.objects.get(reply_id=result.named("start")[0]["assistant_message"]["id"])
    assert record.summary_id is None


@pytest.mark.django_db(transaction=True)
def test_an_edit_saved_in_another_tab_as_the_discard_starts_is_discarded_with_it(user, monkeypatch):
    """The DELETE read the summary's edit chain before taking the chat's row: an edit another tab saved in
    between (a new version, the one it replaced discarded) was left out of it, so the discard answered
    200 while the edited copy stayed in use, the window still placed after what it covered."""
    conversation = Conversation.objects.create(owner=user, offline=True)
    ids = seed_messages(conversation, 20, model="gpt-4o-mini")
    summary = _summary(conversation, first=ids[1], through=ids[9], text="We chose PostgreSQL.")
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[10])
    real_lock = summary_services._conversation_lock
    other_tab: list[object] = []

    def edit() -> None:
        try:
            other_tab.append(summary_edit(summary=Message.objects.get(pk=summary.pk), content="We chose GIN."))
        except Exception as exc:  # SQLite: it waits for the discard's transaction, then finds it discarded
            other_tab.append(exc)
        finally:
            connection.close()

    def lock_after_the_other_tabs_edit(**kwargs) -> None:
        monkeypatch.setattr(summary_services, "_conversation_lock", real_lock)
        tab = threading.Thread(target=edit)
        tab.start()
        tab.join(timeout=5)  # PostgreSQL: committed now; SQLite: waits for this transaction
        real_lock(**kwargs)

    monkeypatch.setattr(summary_services, "_conversation_lock", lock_after_the_other_tabs_edit)
    summary_discard(summary=summary)

    wait_for(lambda: other_tab, timeout=30, what="the other tab's edit")
    assert summary_current(conversation=conversation) is None
    assert not Message.objects.filter(conversation=conversation, kind="summary", discarded=False).exists()
    conversation.refresh_from_db()
    assert conversation.window_start_id is None
