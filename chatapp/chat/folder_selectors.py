"""Reads of chat folders (folder_models): a user's folders, one of them (Http404 for anyone else's,
as for every object here), and the chats the sidebar lists in each."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import Count, F, QuerySet
from django.db.models.expressions import Window
from django.db.models.functions import RowNumber
from django.shortcuts import get_object_or_404

from optimizer.lexical import fold

from .folder_models import Folder
from .models import Conversation


def folder_list(*, owner: User) -> list[Folder]:
    """The owner's folders by name, whatever its case and accents ("Été" among the E's).

    Sorted here: both databases order lower(name) by code point (SQLite always, PostgreSQL under the C
    collation), which put every name opening with an accented letter after "Z". An owner has at most
    folder_services.MAX_FOLDERS_PER_USER."""
    return sorted(Folder.objects.filter(owner=owner), key=lambda f: (fold(f.name), f.name.casefold(), f.pk))


def folder_get(*, owner: User, pk: int) -> Folder:
    return get_object_or_404(Folder, owner=owner, pk=pk)


def folder_conversations(
    *, conversations: QuerySet[Conversation], limit: int
) -> tuple[dict[int, list[Conversation]], bool]:
    """Of `conversations` (the sidebar's: its owner's, not archived, not pinned), those in a folder: up
    to `limit` of each folder by last activity (conv_folder_updated_idx), keyed by folder id, and whether
    a folder holds more. One query, however many folders: each folder's rows numbered in its order."""
    ordered = [F("updated_at").desc(), F("id").desc()]
    rows = (
        conversations.filter(folder__isnull=False)
        .annotate(place=Window(RowNumber(), partition_by=[F("folder_id")], order_by=ordered))
        .filter(place__lte=limit + 1)
        .order_by("folder_id", "place")
    )
    found: dict[int, list[Conversation]] = {}
    more = False
    for conversation in rows:
        if conversation.place > limit:  # type: ignore[attr-defined]
            more = True
            continue
        found.setdefault(conversation.folder_id, []).append(conversation)  # type: ignore[arg-type]
    return found, more


def folder_archived_counts(*, owner: User, folder_ids: list[int]) -> dict[int, int]:
    """How many archived chats each of these folders holds, keyed by folder id (none: not a key). The
    sidebar lists no archived chat, so a folder holding only archived ones says where they are rather
    than "No chats in this folder." (conv_folder_updated_idx: the folders' rows only)."""
    rows = (
        Conversation.objects.filter(owner=owner, folder_id__in=folder_ids, archived_at__isnull=False)
        .values("folder_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {row["folder_id"]: row["n"] for row in rows}
