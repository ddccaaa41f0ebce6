"""Reads on the message tree (issue 13, edit and branches): the tail of the active path, and where a
message stands among its siblings. The active path is `superseded=False` (see models.Message)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Q

from chatapp.chat.models import Message

# (sibling_index, sibling_count): 1-based position among the children of the same parent, in id order.
SiblingPlace = tuple[int, int]


def path_tail_id(*, conversation_id: int) -> int | None:
    """The last chat message of the active path: the parent of the next message sent (msg_conv_path_idx,
    however many messages of other branches are newer)."""
    return (
        Message.objects.filter(conversation_id=conversation_id, kind=Message.Kind.CHAT, superseded=False)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )


def _siblings_q(*, conversation_id: int, parent_ids: set[int], roots: bool) -> Q:
    q = Q(parent_id__in=sorted(parent_ids)) if parent_ids else Q(pk__in=[])
    if roots:
        # Roots: the first message and its edits (msg_conv_root_idx).
        q |= Q(conversation_id=conversation_id, parent__isnull=True, kind=Message.Kind.CHAT)
    return q


def message_sibling_places(*, messages: Iterable[Message]) -> dict[int, SiblingPlace]:
    """Sibling index and count of each chat message given, in one grouped query (a timeline page)."""
    chat = [m for m in messages if m.kind == Message.Kind.CHAT]
    if not chat:
        return {}
    conversation_id = chat[0].conversation_id
    parent_ids = {m.parent_id for m in chat if m.parent_id is not None}
    roots = any(m.parent_id is None for m in chat)
    groups: dict[int | None, list[int]] = {}
    rows = (
        Message.objects.filter(_siblings_q(conversation_id=conversation_id, parent_ids=parent_ids, roots=roots))
        .order_by("id")
        .values_list("parent_id", "id")
    )
    for parent_id, pk in rows:
        groups.setdefault(parent_id, []).append(pk)
    places: dict[int, SiblingPlace] = {}
    for m in chat:
        group = groups.get(m.parent_id, [])
        places[m.pk] = (group.index(m.pk) + 1, len(group)) if m.pk in group else (1, 1)
    return places


def message_sibling_ids(*, message: Message) -> list[int]:
    """The ids of `message` and its siblings, in id order."""
    q = _siblings_q(
        conversation_id=message.conversation_id,
        parent_ids={message.parent_id} if message.parent_id is not None else set(),
        roots=message.parent_id is None,
    )
    return list(Message.objects.filter(q).order_by("id").values_list("id", flat=True))
