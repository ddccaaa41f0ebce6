"""The hard packing rules over inputs `pack` accepts but no chat of the app makes: no user message at
all, only system messages, empty contents and empty part lists, a window start or a summary naming an
id that is not there, ids shared by several messages (the CLI refuses those; the API does not check).

The rules: the request as sent (shaped for the wire) never exceeds the budget; system messages, pins,
the first user message and the newest message are sent; order is kept; the window is a suffix of
whole rounds, only replies after the newest question left out inside it. A refusal names a need
larger than the budget.
"""

import dataclasses
import random

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from optkit import MODEL, source_of

from optimizer import (
    ContextTooLargeError,
    Msg,
    PackConfig,
    Summary,
    count_message,
    count_messages,
    extractive_summary,
    pack,
)
from optimizer.shape import shape_request

SHRINK_LIMITED = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
PIECES = ["the", "port", "is", "8443", "tomato", "", "\n", "NOTE: keep", "x" * 30, "\U0001f680"]
LINKED_IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
SEND_ALL_THAT_FITS = PackConfig(trigger_ratio=1.0, target_ratio=0.9, fast_headroom=0.0, fill_window_ratio=0.9)


@st.composite
def odd_histories(draw):
    """Any roles in any order, each message tagged `#<position>|` so that it is known by its content
    too (ids may be shared)."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    out = []
    for i in range(draw(st.integers(0, 30))):
        role = draw(st.sampled_from(["system", "user", "user", "assistant", "assistant", "tool"]))
        text = f"#{i}| " + " ".join(rng.choices(PIECES, k=draw(st.sampled_from([0, 0, 1, 5, 40, 300]))))
        shape = draw(st.integers(0, 10))
        content = [] if shape == 0 else [{"type": "text", "text": text}, LINKED_IMAGE] if shape == 1 else text
        m = Msg(id=f"m{i}", role=role, content=content, pinned=draw(st.integers(0, 8)) == 0,
                name=draw(st.sampled_from([None, None, "bob"])))
        out.append(dataclasses.replace(m, tokens=count_message(m, model=MODEL)))
    if out and draw(st.integers(0, 3)) == 0:
        pool = draw(st.integers(1, 3))
        out = [dataclasses.replace(m, id=f"d{i % pool}") for i, m in enumerate(out)]
    return out


def _position(msgs, packed):
    """The input position a packed message stands for: its id when ids are unique, else its content or
    its tag when compressed (None: compressed to a marker alone, or an empty list of parts)."""
    ids = [m.id for m in msgs]
    if len(set(ids)) == len(ids):
        return ids.index(packed.source_ids[0])
    for i, m in enumerate(msgs):
        if m.content and packed.content == m.content:
            return i
    text = packed.content if isinstance(packed.content, str) else ""
    tags = [i for i in range(len(msgs)) if text.startswith(f"#{i}|")]
    return tags[0] if tags else None


def check_rules(msgs, budget, result, config):
    assert shape_request(result.messages, model=MODEL).tokens <= budget
    sent = [{"role": p.role, "content": p.content, **({"name": p.name} if p.name else {})} for p in result.messages]
    assert count_messages(sent, model=MODEL) == result.stats["tokens_after"]
    singles = [p for p in result.messages if p.origin not in ("summary", "recall")]
    places = [_position(msgs, p) for p in singles]
    known = [i for i in places if i is not None]
    assert known == sorted(known) and len(set(known)) == len(known)
    users = [i for i, m in enumerate(msgs) if m.role == "user"]
    static = {i for i, m in enumerate(msgs) if m.role == "system" or m.pinned}
    if users and config.keep_first_user:
        static.add(users[0])
    must = static | {len(msgs) - 1} | ({users[-1]} if users else set())
    if None in places:  # not known by its content: at least as many messages as the must-keeps
        assert len(places) >= len(must)
        return
    assert must <= set(known)
    ids = [m.id for m in msgs]
    if result.stats["optimization_applied"] and len(set(ids)) == len(ids):  # shared ids: no telling where
        ws = ids.index(result.window_start)
        assert ws == 0 or msgs[ws].role == "user"
        assert all(i >= ws for i in known if i not in static)
        newest_user = users[-1] if users else -1
        holes = [i for i in range(ws, len(msgs)) if i not in static and i not in known]
        assert all(i > newest_user for i in holes)  # only replies after the newest question


@settings(max_examples=300, deadline=None, phases=SHRINK_LIMITED, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=odd_histories(), budget=st.one_of(st.integers(1, 80), st.integers(81, 3000)),
       pref=st.sampled_from(["fast", "balanced", "quality"]), send_all=st.booleans(), keep_first=st.booleans(),
       inline=st.booleans(), recall=st.booleans(), data=st.data())
def test_odd_but_valid_inputs_keep_the_hard_rules(msgs, budget, pref, send_all, keep_first, inline, recall, data):
    ids = sorted({m.id for m in msgs})
    window_start = data.draw(st.sampled_from([None, "gone", *ids]))
    summary = None
    if data.draw(st.booleans()):
        summary = Summary(id="s", content="[Conversation summary]\n" + "gist " * data.draw(st.integers(0, 200)),
                          through_id=data.draw(st.sampled_from(["gone", *ids])))
    config = dataclasses.replace(SEND_ALL_THAT_FITS if send_all else PackConfig(), keep_first_user=keep_first)
    try:
        result = pack(msgs, budget=budget, preference=pref, model=MODEL, window_start=window_start, summary=summary,
                      config=config, summarize_now=extractive_summary if inline else None,
                      recall_source=source_of([m for m in msgs if isinstance(m.content, str)]) if recall else None)
    except ContextTooLargeError as exc:
        assert exc.needed > budget == exc.budget
        return
    if msgs:
        check_rules(msgs, budget, result, config)
    else:
        assert result.messages == [] and not result.stats["optimization_applied"]
