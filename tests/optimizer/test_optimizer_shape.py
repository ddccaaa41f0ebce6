"""The request as every chat template accepts it (optimizer.shape): one leading system message,
user and assistant alternating, nothing lost, nothing reordered, tokens counted as sent."""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from optkit import MODEL

from optimizer import PackedMessage, count_message, count_messages
from optimizer.shape import BRIDGE, shape_request


def packed(role: str, content: str, origin: str = "verbatim", ids: tuple[str, ...] = ("x",)) -> PackedMessage:
    return PackedMessage(role, content, ids, origin, count_message({"role": role, "content": content}, model=MODEL))


def roles(messages: list[dict]) -> list[str]:
    return [m["role"] for m in messages]


def test_a_summarized_turn_with_recall_and_a_stopped_reply():
    layout = [
        packed("system", "You are terse."),
        packed("user", "Plan my trip to Lisbon.", "pinned"),
        packed("system", "[Conversation summary]\nWe booked flights.", "summary"),
        packed("user", "Which hotel?"),
        packed("assistant", "The Avenida."),
        packed("user", "And a restaurant?"),
        packed("assistant", ""),  # stopped before its first word: nothing to send
        packed("user", "Also the museum hours?"),
        packed("system", "[Recalled from earlier]\nuser: I love tiles.", "recall"),
        packed("user", "What did I say I love?"),
    ]
    shaped = shape_request(layout, model=MODEL)
    assert shaped.messages == [
        {"role": "system", "content": "You are terse.\n\n[Conversation summary]\nWe booked flights."},
        {"role": "user", "content": "Plan my trip to Lisbon.\n\nWhich hotel?"},
        {"role": "assistant", "content": "The Avenida."},
        {"role": "user", "content": "And a restaurant?\n\nAlso the museum hours?\n\n"
                                    "[Recalled from earlier]\nuser: I love tiles.\n\nWhat did I say I love?"},
    ]
    assert set(shaped.notes) == {
        "the summary joined to the leading system message",
        "the recall block opens the newest message",
        "consecutive user messages merged (3 times)",
        "an empty reply (stopped before its first word) left out",
    }
    assert shaped.tokens == count_messages(shaped.messages, model=MODEL)
    assert shaped.tokens < sum(p.tokens for p in layout) + 3


def test_an_alternating_request_is_left_as_it_is():
    layout = [packed("system", "Be brief."), packed("user", "Hi"), packed("assistant", "Hello."), packed("user", "Bye")]
    shaped = shape_request(layout, model=MODEL)
    assert shaped.messages == [{"role": p.role, "content": p.content} for p in layout]
    assert shaped.notes == ()
    assert shaped.tokens == sum(p.tokens for p in layout) + 3


def test_an_assistant_first_history_gets_a_user_line_before_it():
    shaped = shape_request([packed("assistant", "Welcome! Ask me anything."), packed("user", "Hi")], model=MODEL)
    assert roles(shaped.messages) == ["user", "assistant", "user"]
    assert shaped.messages[0]["content"] == BRIDGE
    assert shaped.notes == ("a user line put before the assistant's first message",)
    assert shaped.tokens == count_messages(shaped.messages, model=MODEL)


def test_image_parts_are_kept_when_messages_merge():
    image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    layout = [packed("user", "First"), PackedMessage("user", image, ("i",), "verbatim", 90)]
    shaped = shape_request(layout, model=MODEL)
    assert shaped.messages == [{"role": "user", "content": [{"type": "text", "text": "First"}, *image]}]


# --- properties ------------------------------------------------------------------------------------

@st.composite
def layouts(draw):
    """Packed contexts as pack() can lay them out: static system messages and pins, a summary, a
    window of rounds with gaps (failed replies) and empty replies (stopped before their first word), a
    recall block, the newest user message."""
    out = []
    words = st.text(alphabet="abcdefgh ", min_size=1, max_size=30)
    for k in range(draw(st.integers(0, 2))):
        out.append(packed("system", f"system {k}: " + draw(words)))
    for k in range(draw(st.integers(0, 2))):
        out.append(packed(draw(st.sampled_from(["user", "assistant"])), f"pin {k}: " + draw(words), "pinned"))
    if draw(st.booleans()):
        out.append(packed("system", "[Conversation summary] " + draw(words), "summary"))
    for k in range(draw(st.integers(0, 8))):
        role = draw(st.sampled_from(["user", "assistant", "assistant", "stopped"]))
        out.append(packed("assistant", draw(st.sampled_from(["", " "]))) if role == "stopped"
                   else packed(role, f"turn {k}: " + draw(words)))
    if draw(st.booleans()):
        out.append(packed("system", "[Recalled] " + draw(words), "recall"))
    out.append(packed("user", "newest: " + draw(words)))
    return out


@settings(max_examples=300)
@given(layouts())
def test_every_shaped_request_fits_a_strict_template(layout):
    shaped = shape_request(layout, model=MODEL)
    r = roles(shaped.messages)
    # one leading system message at most, then user first, roles alternating, the newest last
    assert "system" not in r[1:]
    talk = r[1:] if r[0] == "system" else r
    assert talk[0] == "user" and talk[-1] == "user"
    assert all(a != b for a, b in itertools.pairwise(talk))
    assert all(m["content"].strip() for m in shaped.messages if m["role"] == "assistant")  # no empty reply
    # nothing lost and nothing reordered, but system text moves to the front
    sent = "\n\n".join(m["content"] for m in shaped.messages)
    system_first = [p for p in layout if p.role == "system" and p.origin != "recall"]
    others = [p for p in layout if not (p.role == "system" and p.origin != "recall")]
    position = 0
    for p in [*system_first, *others]:
        if not p.content.strip():
            continue  # an empty reply is left out (asserted above)
        found = sent.find(p.content, position)
        assert found >= 0, p
        position = found + len(p.content)
    # counted as sent; never more than packed unless a bridge line was needed
    assert shaped.tokens == count_messages(shaped.messages, model=MODEL)
    if BRIDGE not in sent:
        assert shaped.tokens <= sum(p.tokens for p in layout) + 3
