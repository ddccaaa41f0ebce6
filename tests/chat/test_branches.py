"""Edit and branches (issue 13): messages form a tree, the active path is what is sent, counted,
recalled and shown; editing and regenerating add siblings; a switch brings a branch back as it was."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.http import Http404
from django.urls import reverse

from chatapp.chat import branch_services
from chatapp.chat.branch_selectors import message_sibling_places
from chatapp.chat.branch_services import branch_switch
from chatapp.chat.chat_retry import chat_edit_start, chat_regenerate_start
from chatapp.chat.chat_turn import chat_turn_start, turn_pack, turn_stream
from chatapp.chat.context import context_load
from chatapp.chat.message_services import message_append, message_pin_set
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.chat.search_selectors import message_search
from chatapp.chat.selectors import conversation_list
from chatapp.chat.summary_selectors import summary_current
from chatapp.dashboard.message_map import dashboard_message_map
from tests.support.accounts import token_client
from tests.support.branches import active_path, assert_path_consistent

pytestmark = pytest.mark.django_db


def finish(turn) -> None:
    async def run() -> None:
        async for _ in turn_stream(turn=turn):
            pass

    async_to_sync(run)()


def exchange(user, conversation, text: str) -> tuple[Message, Message]:
    turn = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content=text))
    finish(turn)
    return Message.objects.get(pk=turn.user_message_id), Message.objects.get(pk=turn.reply_id)


@pytest.fixture
def offline(user):
    return Conversation.objects.create(owner=user, offline=True)


def test_sends_thread_one_path(user, offline):
    q1, a1 = exchange(user, offline, "first question about tomatoes")
    q2, a2 = exchange(user, offline, "second question about cucumbers")
    assert (q1.parent_id, a1.parent_id, q2.parent_id, a2.parent_id) == (None, q1.pk, a1.pk, q2.pk)
    assert active_path(offline) == [q1.pk, a1.pk, q2.pk, a2.pk]
    assert message_sibling_places(messages=[q1, a1, q2, a2]) == {m.pk: (1, 1) for m in (q1, a1, q2, a2)}
    assert_path_consistent(offline)


def test_edit_adds_a_sibling_and_sends_only_the_new_path(user, offline):
    q1, a1 = exchange(user, offline, "first question about tomatoes")
    q2, a2 = exchange(user, offline, "second question about cucumbers")
    turn = turn_pack(start=chat_edit_start(user=user, message=q2, content="second question about peppers"))
    edited = Message.objects.get(pk=turn.user_message_id)
    assert edited.parent_id == a1.pk and edited.content == "second question about peppers"
    assert [m["content"] for m in turn.messages if m["role"] == "user"][-1].endswith("peppers")
    assert not any("cucumbers" in str(m["content"]) for m in turn.messages)
    finish(turn)
    q2.refresh_from_db()
    a2.refresh_from_db()
    assert q2.superseded and a2.superseded and q2.off_path_by == a2.off_path_by == q2.pk
    assert turn.user_message["sibling_index"] == 2 and turn.user_message["sibling_count"] == 2
    assert message_sibling_places(messages=[q2, edited]) == {q2.pk: (1, 2), edited.pk: (2, 2)}
    assert active_path(offline) == [q1.pk, a1.pk, edited.pk, turn.reply_id]
    assert_path_consistent(offline)
    # The next send follows the edited branch.
    q3, _ = exchange(user, offline, "third")
    assert q3.parent_id == turn.reply_id


def test_switch_brings_a_branch_back_as_it_was(user, offline):
    _q1, _a1 = exchange(user, offline, "first question about tomatoes")
    q2, _a2 = exchange(user, offline, "second question about cucumbers")
    _q3, a3 = exchange(user, offline, "third question about onions")
    old_path = active_path(offline)
    turn = turn_pack(start=chat_edit_start(user=user, message=q2, content="second question about peppers"))
    finish(turn)
    new_path = active_path(offline)
    Conversation.objects.filter(pk=offline.pk).update(window_start_id=new_path[-1])

    shown = branch_switch(message=Message.objects.get(pk=turn.user_message_id), index=1)
    assert shown.pk == q2.pk
    assert active_path(offline) == old_path  # q3 and a3 came back with q2
    offline.refresh_from_db()
    assert offline.window_start_id is None  # the next request refits the new path
    assert_path_consistent(offline)
    ctx = context_load(conversation=offline)
    assert [int(m.id) for m in ctx.msgs] == old_path

    branch_switch(message=q2, index=2)
    assert active_path(offline) == new_path
    assert_path_consistent(offline)
    branch_switch(message=q2, index=2)  # already shown: nothing moves
    assert active_path(offline) == new_path

    with pytest.raises(ValidationError) as info:
        branch_switch(message=q2, index=3)
    assert "from 1 to 2" in str(info.value)
    with pytest.raises(ValidationError) as info:
        branch_switch(message=a3, index=1)  # its parent is on another branch now
    assert info.value.code == "off_path"


def test_a_switch_in_a_chat_deleted_meanwhile_is_a_404(user, offline, monkeypatch):
    q1, _a1 = exchange(user, offline, "first question about tomatoes")
    turn = turn_pack(start=chat_edit_start(user=user, message=q1, content="first question about peppers"))
    finish(turn)
    edited = Message.objects.get(pk=turn.user_message_id)
    real_siblings = branch_services.message_sibling_ids

    def siblings_then_deleted(*, message):
        found = real_siblings(message=message)
        Conversation.objects.filter(pk=offline.pk).delete()  # another tab, between the switch's reads
        return found

    monkeypatch.setattr(branch_services, "message_sibling_ids", siblings_then_deleted)
    with pytest.raises(Http404):
        branch_switch(message=edited, index=1)


def test_regenerate_keeps_the_old_reply_as_a_branch(user, offline):
    q1, a1 = exchange(user, offline, "what is a tomato")
    turn = turn_pack(start=chat_regenerate_start(user=user, reply=a1))
    finish(turn)
    a1.refresh_from_db()
    assert a1.superseded and a1.off_path_by == a1.pk
    new = Message.objects.get(pk=turn.reply_id)
    assert new.parent_id == q1.pk
    assert message_sibling_places(messages=[new]) == {new.pk: (2, 2)}
    branch_switch(message=new, index=1)
    assert active_path(offline) == [q1.pk, a1.pk]
    assert_path_consistent(offline)


def test_after_a_switch_the_next_turns_run_and_leave_the_chat_free(user, offline):
    """A switch leaves its claim behind, already stale (a send that waited on the switch must not find
    the row free before it re-reads the path): it blocks nothing, and the next turn takes it over."""
    exchange(user, offline, "first question about tomatoes")
    q2, _ = exchange(user, offline, "second question about cucumbers")
    finish(turn_pack(start=chat_edit_start(user=user, message=q2, content="second question about peppers")))
    branch_switch(message=q2, index=1)
    branch_switch(message=q2, index=2)  # a second switch over the stale mark
    q3, a3 = exchange(user, offline, "third question about onions")
    assert active_path(offline)[-2:] == [q3.pk, a3.pk] and q3.parent_id == active_path(offline)[-3]
    offline.refresh_from_db()
    assert offline.turn_claimed_at is None
    branch_switch(message=q2, index=1)
    finish(turn_pack(start=chat_regenerate_start(user=user, reply=Message.objects.get(pk=active_path(offline)[-1]))))
    offline.refresh_from_db()
    assert offline.turn_claimed_at is None
    assert_path_consistent(offline)


def test_no_switch_or_edit_while_a_reply_streams(user, offline):
    q1, a1 = exchange(user, offline, "what is a tomato")
    turn = turn_pack(start=chat_regenerate_start(user=user, reply=a1))  # streaming, not finished
    with pytest.raises(ValidationError) as info:
        branch_switch(message=a1, index=1)
    assert info.value.code == "conflict"
    with pytest.raises(ValidationError) as info:
        chat_edit_start(user=user, message=q1, content="what is a cucumber")
    assert info.value.code == "conflict"
    finish(turn)


def test_edit_refuses_what_cannot_be_edited(user, offline):
    q1, a1 = exchange(user, offline, "what is a tomato")
    with pytest.raises(ValidationError):
        chat_edit_start(user=user, message=a1, content="a reply is not yours to edit")
    with pytest.raises(ValidationError):
        chat_edit_start(user=user, message=q1, content="   ")
    turn = turn_pack(start=chat_edit_start(user=user, message=q1, content="what is a cucumber"))
    finish(turn)
    q1.refresh_from_db()
    with pytest.raises(ValidationError) as info:
        chat_edit_start(user=user, message=q1, content="off the path")
    assert info.value.code == "off_path"
    # The first message's edits are roots: siblings of each other.
    edited = Message.objects.get(pk=turn.user_message_id)
    assert edited.parent_id is None
    assert message_sibling_places(messages=[edited]) == {edited.pk: (2, 2)}


def _summary(conversation, *, through: Message, first: Message) -> Message:
    return message_append(
        conversation=conversation, role="system", kind="summary", content="[Conversation summary] tomatoes",
        covers_from_id=first.pk, covers_through_id=through.pk,
    )


def test_a_summary_is_sent_only_on_the_path_it_summarized(user, offline):
    q1, a1 = exchange(user, offline, "first question about tomatoes")
    q2, a2 = exchange(user, offline, "second question about cucumbers")
    early = _summary(offline, through=a1, first=q1)
    late = _summary(offline, through=a2, first=q1)
    assert summary_current(conversation=offline).pk == late.pk

    turn = turn_pack(start=chat_edit_start(user=user, message=q2, content="second question about peppers"))
    finish(turn)
    late.refresh_from_db()
    assert late.superseded and not Message.objects.get(pk=early.pk).superseded
    assert summary_current(conversation=offline).pk == early.pk  # covers q1..a1: still this path's
    assert context_load(conversation=offline).summary_message_id == early.pk

    branch_switch(message=q2, index=1)
    assert summary_current(conversation=offline).pk == late.pk  # back with its branch


def test_dashboard_map_and_search_follow_the_active_path(user, offline):
    exchange(user, offline, "first question about tomatoes")
    q2, a2 = exchange(user, offline, "second question about cucumbers")
    turn = turn_pack(start=chat_edit_start(user=user, message=q2, content="second question about peppers"))
    finish(turn)
    shown = dashboard_message_map(conversation=offline)
    assert shown["count"] == 4 and shown["record_id"] == OptimizationRecord.objects.get(reply_id=turn.reply_id).pk
    assert [h.message_id for h in message_search(owner=user, query="cucumbers").hits] == []
    found = {h.message_id for h in message_search(owner=user, query="peppers").hits}
    assert turn.user_message_id in found and found <= set(active_path(offline))

    branch_switch(message=q2, index=1)
    shown = dashboard_message_map(conversation=offline)
    assert shown["record_id"] == OptimizationRecord.objects.get(reply_id=a2.pk).pk
    found = {h.message_id for h in message_search(owner=user, query="cucumbers").hits}
    assert q2.pk in found and found <= set(active_path(offline))


def test_the_chat_list_finds_a_chat_by_the_text_of_its_path_only(user, offline, client):
    """A version edited away is out of the chat list's search as it is out of message search and
    recall: the chat would open on a path that does not show it, with no snippet to say where."""
    unedited = Conversation.objects.create(owner=user, offline=True)
    for conversation in (offline, unedited):
        exchange(user, conversation, "first question about tomatoes")
    q2, _ = exchange(user, offline, "second question about walruses")
    exchange(user, unedited, "second question about walruses")
    finish(turn_pack(start=chat_edit_start(user=user, message=q2, content="second question about penguins")))

    def listed(query: str) -> list[int]:
        return [c.pk for c in conversation_list(owner=user, query=query)]

    assert listed("walrus") == [unedited.pk]
    assert listed("penguin") == [offline.pk]
    assert {h.conversation_id for h in message_search(owner=user, query="walrus").hits} == {unedited.pk}
    api = token_client(user)
    assert [c["id"] for c in api.get("/api/conversations/", {"q": "walrus"}).json()["results"]] == [unedited.pk]
    client.force_login(user)
    html = client.get(reverse("chat-sidebar"), {"q": "walrus"}).content.decode()
    assert f'data-id="{unedited.pk}"' in html and "<mark>walruses</mark>" in html
    assert f'data-id="{offline.pk}"' not in html

    branch_switch(message=q2, index=1)  # the first version shown again: found again by its text
    assert sorted(listed("walrus")) == sorted([offline.pk, unedited.pk])
    assert listed("penguin") == []


def test_a_share_link_keeps_the_branch_it_was_made_on(user, offline):
    """A link shows the path as it was when shared: neither what was edited away before, nor the
    branch switched back to afterwards (the snapshot is its last message's ancestors)."""
    from chatapp.chat.share_selectors import share_messages
    from chatapp.chat.share_services import conversation_share_create

    exchange(user, offline, "first question about tomatoes")
    q2, _ = exchange(user, offline, "SECRET-DRAFT question about my salary")
    turn = turn_pack(start=chat_edit_start(user=user, message=q2, content="second question about peppers"))
    finish(turn)
    share = conversation_share_create(owner=user, conversation=offline).share
    shown_before = [m.pk for m in share_messages(share=share).messages]
    assert shown_before == active_path(offline)

    branch_switch(message=Message.objects.get(pk=turn.user_message_id), index=1)  # back to the draft
    assert any("SECRET-DRAFT" in m.content for m in Message.objects.filter(pk__in=active_path(offline)))
    shown = share_messages(share=share).messages
    assert [m.pk for m in shown] == shown_before
    assert not any("SECRET-DRAFT" in m.content for m in shown)
    # paged reads walk the same path
    first = share_messages(share=share, limit=2)
    assert [m.pk for m in first.messages + share_messages(share=share, after_id=first.next_after).messages] == (
        shown_before)


@pytest.mark.django_db(transaction=True)
def test_a_send_waiting_on_a_branch_switch_follows_the_branch_it_switched_to(user, monkeypatch):
    """Another tab sends while a switch is being written (a long branch re-indexes for seconds): the
    new message continues the path the switch made active, not the tail it hid."""
    import threading
    import time

    from django.db import connection

    from chatapp.chat import branch_services

    offline = Conversation.objects.create(owner=user, offline=True)
    exchange(user, offline, "first question about tomatoes")
    q2, _ = exchange(user, offline, "second question about cucumbers")
    exchange(user, offline, "third question about onions")
    edit = turn_pack(start=chat_edit_start(user=user, message=q2, content="second question about peppers"))
    finish(edit)
    switching, show = threading.Event(), branch_services.branch_show

    def slow_show(**kwargs):
        switching.set()  # the switch holds the conversation's row from here to its commit
        time.sleep(1.0)
        return show(**kwargs)

    monkeypatch.setattr(branch_services, "branch_show", slow_show)

    def other_tab() -> None:
        try:
            branch_switch(message=q2, index=1)
        finally:
            connection.close()

    tab = threading.Thread(target=other_tab)
    tab.start()
    assert switching.wait(10)
    sent = chat_turn_start(user=user, conversation=offline, content="fourth question, sent meanwhile")
    tab.join(10)
    finish(turn_pack(start=sent))

    # It follows the branch shown (q2's, brought back whole), and the flags say the same path.
    path = active_path(offline)
    assert path[2] == q2.pk and path[-2] == sent.user_message.pk
    assert sorted(Message.objects.filter(conversation=offline, kind="chat", superseded=False)
                  .values_list("id", flat=True)) == path
    assert_path_consistent(offline)
    offline.refresh_from_db()
    assert offline.turn_claimed_at is None


def test_a_message_another_version_replaced_cannot_be_pinned_but_can_be_unpinned(user, offline):
    q1, a1 = exchange(user, offline, "first question about tomatoes")
    Message.objects.filter(pk=a1.pk).update(pinned=True)
    finish(turn_pack(start=chat_edit_start(user=user, message=q1, content="first question about peppers")))
    q1.refresh_from_db()
    a1.refresh_from_db()
    assert q1.superseded and a1.superseded
    # A tab still showing the old version: its pin would say "always sent" of a message nothing sends.
    with pytest.raises(ValidationError, match="switch to it first"):
        message_pin_set(message=q1, pinned=True)
    assert not Message.objects.get(pk=q1.pk).pinned
    # Unpinning is always allowed: it sends nothing more.
    assert not message_pin_set(message=a1, pinned=False).pinned
    assert not Message.objects.get(pk=a1.pk).pinned
    # Back on that version, it pins again.
    branch_switch(message=q1, index=1)
    q1.refresh_from_db()
    assert message_pin_set(message=q1, pinned=True).pinned
