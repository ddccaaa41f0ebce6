"""A stored conversation where every layout rule matters, and the core's answer for each message.

Shared by the tests that check the app's adapters (context loading, summary spans, the timeline, the
API, the stream) against `optimizer.layout`: the expected place is computed here from plain attributes
with the core alone, never with app code, so an adapter that re-derived the rule differently fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from chatapp.chat.models import Conversation, Message
from optimizer.layout import Place, message_place


@dataclass
class LayoutConversation:
    conversation: Conversation
    messages: list[Message]  # every stored row, in id order
    window_start_id: int


def _add(conversation: Conversation, role: str, content: str, **fields) -> Message:
    return Message.objects.create(
        conversation=conversation, role=role, content=content, token_count=8, char_count=len(content), **fields
    )


def make_layout_conversation(*, owner) -> LayoutConversation:
    """System prompt, an assistant greeting before the first user message, a pinned reply and a pinned
    user message before the window, a regenerated-away reply, a failed one, a summary, and a stored
    window start."""
    c = Conversation.objects.create(owner=owner, title="Layout")
    rows = [
        _add(c, "system", "You are terse."),
        _add(c, "assistant", "Hello! How can I help?"),
        _add(c, "user", "first question"),
        _add(c, "assistant", "first answer"),
        _add(c, "user", "second question"),
        _add(c, "assistant", "an answer replaced by Regenerate", superseded=True),
        _add(c, "assistant", "second answer", pinned=True),
        _add(c, "user", "remember: the budget is 40k", pinned=True),
        _add(c, "assistant", "noted"),
        _add(c, "user", "third question"),
        _add(c, "assistant", "a failed answer", status=Message.Status.ERROR),
    ]
    rows.append(_add(c, "system", "[Conversation summary] earlier turns", kind=Message.Kind.SUMMARY,
                     covers_from_id=rows[3].pk, covers_through_id=rows[4].pk, covered_message_count=2))
    window = _add(c, "user", "fourth question")
    rows += [window, _add(c, "assistant", "fourth answer"), _add(c, "user", "fifth question")]
    live = [m for m in rows if m.kind == Message.Kind.CHAT and m.status in Message.LIVE_STATUSES
            and not m.superseded]
    Conversation.objects.filter(pk=c.pk).update(
        window_start_id=window.pk,
        live_message_count=len(live),
        live_token_count=sum(m.token_count for m in live),
        live_char_count=sum(m.char_count for m in live),
    )
    c.refresh_from_db()
    return LayoutConversation(conversation=c, messages=rows, window_start_id=window.pk)


def core_place(*, message: Message, layout: LayoutConversation) -> Place | None:
    """`optimizer.layout.message_place` for one stored message; None for what is never sent as itself."""
    if message.kind != Message.Kind.CHAT or message.superseded:
        return None
    first_user = next(m.pk for m in layout.messages if m.role == "user" and m.kind == Message.Kind.CHAT)
    return message_place(
        role=message.role,
        pinned=message.pinned,
        is_first_user=message.pk == first_user,
        before_window=message.pk < layout.window_start_id,
    )


def expected_places(layout: LayoutConversation) -> dict[int, Place | None]:
    places = {m.pk: core_place(message=m, layout=layout) for m in layout.messages}
    # The fixture exercises every place, or a test on it would prove less than it claims.
    assert set(places.values()) == {"static", "window", "evicted", None}
    return places
