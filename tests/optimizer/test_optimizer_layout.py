"""The layout rule (optimizer.layout): static layer, newest message, must-keeps and rounds, defined once."""

import random

import pytest
from optkit import MODEL, conversation, msg

from optimizer import Msg, is_static, message_place, pack
from optimizer.layout import next_round_after, plan_layout, segments, snap_to_round, starts_round


@pytest.mark.parametrize(
    ("role", "pinned", "first", "keep_first", "expected"),
    [
        ("system", False, False, True, True),
        ("assistant", True, False, True, True),
        ("user", False, True, True, True),
        ("user", False, True, False, False),  # keep_first_user off: the first request is ordinary history
        ("user", False, False, True, False),
        ("assistant", False, False, True, False),
        ("tool", False, False, True, False),
    ],
)
def test_is_static(role, pinned, first, keep_first, expected):
    assert is_static(role=role, pinned=pinned, is_first_user=first, keep_first_user=keep_first) is expected


def test_message_place_for_the_app():
    # what the timeline, the dashboard and the browser mark: static messages are never "evicted"
    assert message_place(role="user", pinned=False, is_first_user=True, before_window=True) == "static"
    assert message_place(role="assistant", pinned=True, is_first_user=False, before_window=True) == "static"
    assert message_place(role="assistant", pinned=False, is_first_user=False, before_window=True) == "evicted"
    assert message_place(role="user", pinned=False, is_first_user=False, before_window=False) == "window"


def test_plan_layout_positions():
    msgs = [msg("s", "system", "rules"), msg("a0", "assistant", "hello"), msg("u1", "user", "first"),
            msg("a1", "assistant", "reply", pinned=True), msg("u2", "user", "second"), msg("a2", "assistant", "x")]
    lay = plan_layout(msgs)
    assert lay.static == (0, 2, 3)
    assert lay.first_user == 2 and lay.newest_user == 4
    assert lay.must_keep == {0, 2, 3, 4}
    assert plan_layout(msgs, keep_first_user=False).static == (0, 3)


def test_plan_layout_without_user_messages():
    lay = plan_layout([msg("s", "system", "rules"), msg("a", "assistant", "hi")])
    assert lay.first_user == lay.newest_user == -1
    assert lay.static == (0,) and lay.must_keep == {0}


def test_plan_layout_agrees_with_the_per_message_rule():
    rng = random.Random(5)
    for _ in range(200):
        msgs = [Msg(id=str(i), role=rng.choice(["system", "user", "assistant", "tool"]), content="x",
                    pinned=rng.random() < 0.15) for i in range(rng.randrange(0, 25))]
        keep = rng.random() < 0.7
        lay = plan_layout(msgs, keep_first_user=keep)
        first = next((i for i, m in enumerate(msgs) if m.role == "user"), -1)
        expected = [i for i, m in enumerate(msgs)
                    if is_static(role=m.role, pinned=m.pinned, is_first_user=i == first, keep_first_user=keep)]
        assert list(lay.static) == expected


def test_rounds():
    msgs = [msg("a0", "assistant", "hi"), msg("u1", "user", "q"), msg("a1", "assistant", "r"),
            msg("t1", "tool", "t"), msg("u2", "user", "q2"), msg("a2", "assistant", "r2")]
    assert [i for i in range(len(msgs)) if starts_round(msgs, i)] == [0, 1, 4]
    assert snap_to_round(msgs, 2, newest_user=4) == 4  # a stored start on a reply moves forward
    assert snap_to_round(msgs, 5, newest_user=4) == 4  # past the last round: the newest round
    assert snap_to_round(msgs, 0, newest_user=4) == 0
    assert snap_to_round(msgs, -1, newest_user=4) == -1  # no window state stays none
    assert next_round_after(msgs, 1) == 4 and next_round_after(msgs, 4) == -1


def test_segments_skip_static_positions():
    assert segments(0, 10, (0, 3, 4, 9)) == [(1, 3), (5, 9)]
    assert segments(4, 8, (0, 3, 4, 9)) == [(5, 8)]
    assert segments(5, 5, ()) == []


def test_pack_follows_the_layout():
    msgs = conversation(40)
    msgs[9] = msg(msgs[9].id, msgs[9].role, msgs[9].content, pinned=True)
    r = pack(msgs, budget=3000, preference="fast", model=MODEL)
    lay = plan_layout(msgs)
    pos = {m.id: i for i, m in enumerate(msgs)}
    ws = pos[r.window_start]
    sent = [pos[p.source_ids[0]] for p in r.messages if p.origin != "summary"]
    assert starts_round(msgs, ws)
    assert [i for i in sent if i < ws] == [i for i in lay.static if i < ws]
    assert sent[-1] == lay.newest_user and lay.must_keep <= set(sent)
