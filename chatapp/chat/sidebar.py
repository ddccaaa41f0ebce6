"""The sidebar's lists, for the chat page and its fragment (views): the pinned chats, the folders with
their chats, then the other chats by last activity, each listed once; a search lists what it finds,
in a folder or not. Archived chats are out of every list unless a search finds them (marked so)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from chatapp.chat import selectors
from chatapp.chat.folder_selectors import folder_archived_counts, folder_conversations, folder_list
from chatapp.chat.models import Conversation
from chatapp.chat.search_match import search_terms

# Chats the sidebar lists at first, of each folder and of the others; "Show older chats" adds as many again.
SIDEBAR_LIMIT = 200
SIDEBAR_MAX = 20_000


def sidebar_limit(request: HttpRequest) -> int:
    """How many chats the sidebar lists: `?limit=` once "Show older chats" was pressed (bounded)."""
    raw = request.GET.get("limit", "")
    return min(max(int(raw), SIDEBAR_LIMIT), SIDEBAR_MAX) if raw.isdecimal() and len(raw) < 7 else SIDEBAR_LIMIT


def sidebar_conversations(*, owner: User, query: str) -> QuerySet[Conversation]:
    """The chats the sidebar lists: not the archived ones, unless a search finds them (marked so)."""
    return selectors.conversation_list(owner=owner, query=query or None, archived=None if query else False)


def _archived_only(*, owner: User, query: str, listed: bool) -> int:
    """How many chats are archived, when the sidebar lists none and no search is typed: the empty list
    then says where they are, not "No chats yet" (after Archive all, every chat is still there)."""
    if query or listed:
        return 0
    return selectors.conversation_archived_list(owner=owner).count()


def _date_label(conversation: Conversation, today: Any) -> str:
    age = (today - timezone.localdate(conversation.updated_at)).days
    if age <= 0:
        return "Today"
    if age == 1:
        return "Yesterday"
    if age < 8:
        return "Previous 7 days"
    return "Previous 30 days" if age < 31 else "Older"


def conversation_groups(conversations: QuerySet[Conversation], *, limit: int) -> tuple[list[dict], bool]:
    """Sections by last activity (Today, Yesterday, Previous 7 and 30 days, Older) of the first `limit`
    chats, and whether there are more."""
    today = timezone.localdate()
    groups: dict[str, list[Conversation]] = {}
    rows = list(conversations[: limit + 1])
    for c in rows[:limit]:
        groups.setdefault(_date_label(c, today), []).append(c)
    return [{"label": label, "items": items} for label, items in groups.items()], len(rows) > limit


def sidebar_lists(*, owner: User, conversations: QuerySet[Conversation], query: str, limit: int) -> dict[str, Any]:
    """The template's `pinned_groups`, `folders`, `conversation_groups` (by date), `more_chats_limit`
    (the `limit=` of "Show older chats", None when all are listed), `archived_only` and `titles_only`
    (a search message text could not be searched for). Without a
    search: "Pinned" first (the latest pinned first; conv_owner_pinned_idx), whether in a folder or not,
    then each folder with its other chats (up to `limit` each), then the chats in no folder by date."""
    pinned_groups: list[dict] = []
    folders: list[dict] = []
    more_in_folders = False
    if not query:
        pinned = list(conversations.filter(pinned_at__isnull=False).order_by("-pinned_at", "-id")[:SIDEBAR_LIMIT])
        if pinned:
            pinned_groups.append({"label": "Pinned", "items": pinned})
        conversations = conversations.filter(pinned_at__isnull=True)
        # No folders (most users): the chats' query is the one it was before folders.
        owned = list(folder_list(owner=owner))
        if owned:
            in_folders, more_in_folders = folder_conversations(conversations=conversations, limit=limit)
            # A pinned chat is listed under Pinned only: its folder counts it, and says where it is
            # when it holds nothing else (not "No chats in this folder." right after a move).
            pinned_in = Counter(c.folder_id for c in pinned if c.folder_id)
            folders = [{"folder": f, "items": in_folders.get(f.pk, []), "pinned": pinned_in[f.pk]} for f in owned]
            # Asked only when a folder lists nothing (most page loads: no query).
            if empty := [f["folder"].pk for f in folders if not f["items"] and not f["pinned"]]:
                archived_in = folder_archived_counts(owner=owner, folder_ids=empty)
                for f in folders:
                    f["archived"] = archived_in.get(f["folder"].pk, 0)
            conversations = conversations.filter(folder__isnull=True)
    groups, more = conversation_groups(conversations, limit=limit)
    more = (more or more_in_folders) and limit < SIDEBAR_MAX
    listed = bool(pinned_groups or groups) or any(f["items"] for f in folders)
    return {
        "pinned_groups": pinned_groups,
        "conversation_groups": groups,
        "folders": folders,
        "more_chats_limit": min(limit + SIDEBAR_LIMIT, SIDEBAR_MAX) if more else None,
        "archived_only": _archived_only(owner=owner, query=query, listed=listed),
        # A search with no word the index holds (stop words, one letter) matched titles alone: the list
        # says so, or "No chats match" would read as "no message says this".
        "titles_only": bool(query) and not search_terms(text=query),
    }
