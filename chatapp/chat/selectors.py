"""Reads. Every lookup of a user's object is scoped to its owner and answers Http404 otherwise, so
another user's ids look exactly like ids that do not exist."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone

from .account_models import AccountDeletion
from .models import Conversation, Message, OptimizationRecord, UserSettings
from .rowsql import CompiledQuery, row_instance
from .search_match import conversation_ids_matching, title_match

MESSAGE_PAGE_MAX = 500


# --- conversations ---------------------------------------------------------------------------------


def conversation_back_url(*, owner: User) -> str:
    """Where a page's "back to the chat" goes: the chat last active, as it was left, or a new chat
    when there is none (`/` is always a new chat)."""
    newest = conversation_list(owner=owner, archived=False).values_list("pk", flat=True).first()
    return reverse("chat-detail", args=[newest]) if newest is not None else reverse("chat-home")


def conversation_list(
    *, owner: User, query: str | None = None, archived: bool | None = None
) -> QuerySet[Conversation]:
    """The owner's conversations, newest first; `query` matches titles (as a substring) or chat
    message text (every content word, the last as a prefix, through the full-text index: a substring
    scan of every message would read the owner's whole history on each keystroke). `archived`: only
    the archived chats (True), only the others (False), or both (None)."""
    conversations = Conversation.objects.filter(owner=owner)
    if archived is not None:
        conversations = conversations.filter(archived_at__isnull=not archived)
    # Runs of white space as one, as message_search reads a query: a title is written with single spaces.
    query = " ".join((query or "").split())
    if query:
        matches = title_match(owner_id=owner.pk, text=query)
        in_messages = conversation_ids_matching(owner=owner, text=query)
        if in_messages is not None:
            matches |= Q(pk__in=in_messages)
        conversations = conversations.filter(matches)
    return conversations.order_by("-updated_at", "-id")


def conversation_archived_list(*, owner: User) -> QuerySet[Conversation]:
    """The owner's archived conversations, the latest archived first (conv_owner_archived_idx)."""
    return Conversation.objects.filter(owner=owner, archived_at__isnull=False).order_by("-archived_at", "-id")


def conversation_get(*, owner: User, pk: int) -> Conversation:
    return get_object_or_404(Conversation, owner=owner, pk=pk)


def _send_conversation_query(_shape: None, *, pk: int, owner_id: int) -> QuerySet[Conversation]:
    return Conversation.objects.select_related("llm_config").filter(pk=pk, owner_id=owner_id)


# Every send reads its conversation with its model config: compiled once (rowsql.CompiledQuery).
_SEND_CONVERSATION = CompiledQuery(_send_conversation_query)


def conversation_get_for_send(*, owner: User, pk: int) -> Conversation:
    """`owner`'s conversation `pk` with its model config (and `owner` as its owner: a chat whose config
    was deleted uses the owner's default config); 404 for anyone else's."""
    low, high = connection.ops.integer_field_range(Conversation._meta.pk.get_internal_type())
    # Out of the column's range matches nothing, as the ORM has it (the driver would raise instead).
    found = _SEND_CONVERSATION.instances(None, pk=pk, owner_id=owner.pk) if low <= pk <= high else []
    if not found:
        raise Http404("No Conversation matches the given query.")
    conversation = found[0]
    conversation.owner = owner
    return conversation


# --- messages ------------------------------------------------------------------------------------------


def message_list(*, conversation: Conversation, before_id: int | None = None, limit: int = 100) -> list[Message]:
    """Up to `limit` newest messages of the active path older than `before_id` (all when None), oldest first.

    A keyset page on the (conversation, id) index: the cost does not grow with the history's length.
    Other branches (`superseded`) are reached through their siblings' `n/m` switch, not listed.
    """
    limit = max(1, min(int(limit), MESSAGE_PAGE_MAX))
    messages = Message.objects.filter(conversation=conversation, superseded=False)
    if before_id is not None:
        messages = messages.filter(id__lt=before_id)
    page = list(messages.order_by("-id")[:limit])
    page.reverse()
    return page


def message_list_since(*, conversation: Conversation, since_id: int, limit: int = 100) -> list[Message]:
    """Up to `limit` messages from `since_id` on, oldest first (what another tab added or finished)."""
    limit = max(1, min(int(limit), MESSAGE_PAGE_MAX))
    return list(
        Message.objects.filter(conversation=conversation, superseded=False, id__gte=since_id).order_by("id")[:limit]
    )


def message_numbers(*, conversation_id: int, ids: Iterable[int]) -> dict[int, int]:
    """How users number messages: a chat message's 1-based position among the chat messages of the
    conversation's active path (summaries and other branches are not numbered), as summary headers,
    the divider and the dashboard show them.

    Ids are database keys: they interleave across conversations and skip summaries, so they are never
    shown. One query reading the conversation's chat message ids up to the largest id asked, in
    order; an id that is not a chat message of the conversation gets the number of the one before it.
    """
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return {}
    chat_ids = list(
        Message.objects.filter(
            conversation_id=conversation_id, kind=Message.Kind.CHAT, superseded=False, id__lte=wanted[-1]
        )
        .order_by("id")
        .values_list("id", flat=True)
    )
    return {pk: bisect_right(chat_ids, pk) for pk in wanted}


def summary_numbers(*, conversation_id: int) -> dict[int, int]:
    """Summaries by their 1-based order in the conversation ("summary 3"), edits and discarded ones
    included (a conversation holds few summaries)."""
    ids = Message.objects.filter(conversation_id=conversation_id, kind=Message.Kind.SUMMARY).order_by("id")
    return {pk: k for k, pk in enumerate(ids.values_list("id", flat=True), start=1)}


def message_get(*, owner: User, pk: int) -> Message:
    return get_object_or_404(Message.objects.select_related("conversation"), pk=pk, conversation__owner=owner)


def optimization_record_list(*, conversation: Conversation) -> QuerySet[OptimizationRecord]:
    """A conversation's optimization records in turn order."""
    return OptimizationRecord.objects.filter(conversation=conversation).order_by("id")


# --- accounts ------------------------------------------------------------------------------------------


def username_held_by_deletion(*, username: str) -> bool:
    """Whether `username` (any case, as sign-up compares them) is an account its user deleted whose data a
    worker is still deleting (account_purge): the name comes free once the user row goes, last."""
    return AccountDeletion.objects.filter(user__username__iexact=username).exists()


def account_is_last_admin(*, user: User) -> bool:
    """Whether `user` is the instance's only active administrator (account_services refuses to turn that
    account off: no one could administer the instance)."""
    admins = User.objects.filter(is_superuser=True, is_active=True)
    return user.is_superuser and user.is_active and not admins.exclude(pk=user.pk).exists()


def account_holdings(*, user_id: int) -> dict[str, int]:
    """How many chats and messages an account holds: what deleting it takes, counted, not listed (the
    admin's delete page), two index-served counts."""
    return {
        "chats": Conversation.objects.filter(owner_id=user_id).count(),
        "messages": Message.objects.filter(conversation__owner_id=user_id).count(),
    }


# --- user settings -------------------------------------------------------------------------------


def user_settings_get(*, user: User) -> UserSettings:
    # Read in plain SQL: every turn reads them (rowsql). The first read creates them; get_or_create
    # retries the read when a concurrent first request created the row first.
    found = row_instance(UserSettings, where={"user_id": user.pk})
    if isinstance(found, UserSettings):
        return found
    settings, _ = UserSettings.objects.get_or_create(user=user)
    return settings


def reply_coming(*, conversation: Conversation, tail: Message | None) -> bool:
    """A turn holds the chat (a fresh claim) and its path ends with the user's message (`tail`): the reply's
    context is being packed, its row not stored yet. A page opened now (a reload just after a send, whose
    reply goes on all the same) waits for it, then follows it (lost_start.js)."""
    claimed = conversation.turn_claimed_at
    fresh = timezone.now() - timedelta(seconds=settings.STREAM_ORPHAN_SECONDS)
    return claimed is not None and claimed >= fresh and tail is not None and tail.role == Message.Role.USER
