"""A streaming reply's Markdown drawn as it comes (chatapp.chat.stream_markup): `markup` events of the
text so far, spaced by their cost, none for a reply that streams within the interval."""

from __future__ import annotations

import pytest

from chatapp.chat import stream_markup
from chatapp.chat.rendering import markdown_render
from chatapp.chat.stream_markup import COST_SHARE, INTERVAL, StreamMarkup
from tests.support.chat import send

pytestmark = pytest.mark.django_db


class _Clock:
    """The time `now`; a rendering (`render`, put in the module's place) takes `cost` of it."""

    def __init__(self) -> None:
        self.now, self.cost = 0.0, 0.0

    def __call__(self) -> float:
        return self.now

    def render(self, text: str, **kwargs) -> str:
        self.now += self.cost
        return markdown_render(text, **kwargs)


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    clock = _Clock()
    monkeypatch.setattr(stream_markup, "markdown_render", clock.render)
    return clock


def _delta(text: str) -> dict:
    return {"event": "delta", "data": {"text": text}}


def test_markup_is_the_text_so_far_once_the_interval_has_passed(clock):
    markup = StreamMarkup(clock=clock)
    assert markup.after({"event": "start", "data": {}}) is None
    assert markup.after(_delta("Here is **bold")) is None  # the first delta starts the interval
    clock.now += INTERVAL / 2
    assert markup.after(_delta("** text")) is None
    clock.now += INTERVAL / 2

    drawn = markup.after(_delta("\n\n- a list"))

    assert drawn == {"event": "markup", "data": {"html": markdown_render("Here is **bold** text\n\n- a list")}}
    assert "<strong>bold</strong>" in drawn["data"]["html"] and "<li>a list</li>" in drawn["data"]["html"]
    clock.now += INTERVAL
    assert markup.after({"event": "keep", "data": {}}) is None  # not a delta: nothing new to draw


def test_a_costly_rendering_spaces_the_next_by_its_cost(clock):
    markup = StreamMarkup(clock=clock)
    markup.after(_delta("a"))
    clock.now += INTERVAL
    clock.cost = 0.1  # this rendering takes 100 ms: the next waits COST_SHARE times as long
    assert markup.after(_delta("b")) is not None
    clock.now += COST_SHARE * 0.1 - 0.1 - 0.001  # the next is due COST_SHARE x 100 ms after this one began
    assert markup.after(_delta("c")) is None
    clock.now += 0.002
    assert markup.after(_delta("d")) is not None


def test_nothing_is_drawn_after_the_reply_ends(clock):
    markup = StreamMarkup(clock=clock)
    markup.after(_delta("a"))
    markup.after({"event": "done", "data": {}})
    clock.now += 10
    assert markup.after(_delta("b")) is None


def test_a_slow_model_streams_markup_events_and_an_instant_one_none(user, conversation, echo_config, fake_openai):
    echo_config.model = "slow-40"  # some thirty chunks, 40 ms apart
    echo_config.save()
    slow = send(user, conversation, "Please show **bold words** and a list:\n\n- one\n- two")

    names = [name for name, _ in slow.events]
    drawn = slow.named("markup")
    assert drawn and names.index("markup") > names.index("delta") and names[-1] == "done"
    # Each is the answer as far as the deltas before it went, rendered as a stored reply is.
    so_far = ""
    for name, data in slow.events:
        if name == "delta":
            so_far += data["text"]
        elif name == "markup":
            assert data["html"] == markdown_render(so_far)
    assert "<strong>bold words</strong>" in drawn[-1]["html"]

    echo_config.model = "fake-echo"
    echo_config.save()
    assert send(user, conversation, "Again **bold**").named("markup") == []
