"""The context layout rule for stored messages, taken from the core (optimizer.layout).

The static layer (system messages, pins, the first user message) and the window are defined once, in
`optimizer.layout`. The app only adapts it to stored rows: a message's place for the timeline, the API
and the browser; the static test for rows already in memory; and the same test as a query condition,
for reads that must not bring a long history into memory. Nothing here decides the rule again.
"""

from __future__ import annotations

from django.db.models import Q

from chatapp.chat.models import Message
from optimizer.layout import Place, is_static, message_place

__all__ = ["Place", "message_place_get", "new_message_place", "row_is_static", "static_layer_q", "static_layer_sides"]


def row_is_static(*, pk: int, role: str, pinned: bool, first_user_id: int | None) -> bool:
    """`optimizer.layout.is_static` for a stored live chat message."""
    return is_static(role=role, pinned=pinned, is_first_user=pk == first_user_id)


def message_place_get(
    *, message: Message, first_user_id: int | None, window_start_id: int | None,
    kept_ids: frozenset[int] = frozenset(),
) -> Place | None:
    """Where a stored message stands against the stored window start, by the core's rule.

    None for messages that are never sent as themselves whatever the window: summaries (sent as the
    summary slot) and replies replaced by Regenerate. `kept_ids`: the pins the summary in use passed
    over (summary_selectors.summary_kept_pins), sent as pins whether pinned now or not (context_load).
    """
    if message.kind != Message.Kind.CHAT or message.superseded:
        return None
    return message_place(
        role=message.role,
        pinned=message.pinned or message.pk in kept_ids,
        is_first_user=message.pk == first_user_id,
        before_window=window_start_id is not None and message.pk < window_start_id,
    )


def new_message_place(*, role: str, is_first_user: bool, pinned: bool = False) -> Place:
    """The place of a message just written: newer than any window start, and not pinned yet (but for
    an edit of a pinned message, which keeps its pin)."""
    return message_place(role=role, pinned=pinned, is_first_user=is_first_user, before_window=False)


def static_layer_q(*, first_user_id: int | None, **within: object) -> Q:
    """`is_static` as a query condition over live chat messages, each side restricted by `within`
    (the sides of `static_layer_sides`, OR-ed); tests/chat/test_layout.py checks that it selects exactly
    the rows `row_is_static` accepts."""
    sides = static_layer_sides(first_user_id=first_user_id, **within)
    layer = sides[0]
    for side in sides[1:]:
        layer |= side
    return layer


def static_layer_sides(*, first_user_id: int | None, **within: object) -> list[Q]:
    """The conditions whose union is the static layer, each restricted by `within`: each is one index
    range (pins and system messages have partial indexes, the first user message is a primary-key
    lookup), so a read may run them as separate branches (context._context_rows_query)."""
    sides = [Q(pinned=True, **within), Q(role=Message.Role.SYSTEM, kind=Message.Kind.CHAT, **within)]
    if first_user_id is not None:
        sides.append(Q(id=first_user_id, role=Message.Role.USER, **within))
    return sides
