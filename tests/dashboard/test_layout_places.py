"""The dashboard's message map agrees with the core's layout rule (optimizer.layout.message_place).

The map is drawn from what the request path recorded; the request path takes its static layer from the
core. Real turns on the fake endpoint, with a system message and a pin that the window moves past: each
message the core places in the static layer is shown as sent, each one it evicts as not sent verbatim.
"""

from __future__ import annotations

import pytest

from chatapp.chat.message_services import message_pin_set
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.providers.crypto import secret_encrypt
from chatapp.providers.models import LLMConfig
from optimizer.layout import message_place
from tests.dashboard.test_request_path import WORDS, _send

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_rate_limit")]

SENT = {"verbatim", "pinned", "compressed"}


def _core_places(conversation: Conversation, window_start_id: int) -> dict[int, str]:
    rows = list(Message.objects.filter(conversation=conversation, kind=Message.Kind.CHAT, superseded=False)
                .order_by("id"))
    first_user = next(m.pk for m in rows if m.role == "user")
    return {m.pk: message_place(role=m.role, pinned=m.pinned, is_first_user=m.pk == first_user,
                                before_window=m.pk < window_start_id) for m in rows}


def test_map_shows_the_static_layer_sent_and_evicted_messages_not(owner_client, user, fake_openai):
    key = "sk-test-dash-KEY-0002"
    config = LLMConfig.objects.create(
        owner=user, name="fake", base_url=fake_openai.base_url, model="fake-echo",
        api_key_encrypted=secret_encrypt(key), api_key_last4=key[-4:], context_window=1600, max_output_tokens=200,
    )
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    Message.objects.create(conversation=conversation, role="system", content="Answer briefly.", token_count=8,
                           char_count=15)
    Conversation.objects.filter(pk=conversation.pk).update(live_message_count=1, live_token_count=8,
                                                           live_char_count=15)
    for turn in range(9):
        if turn == 2:
            message_pin_set(message=Message.objects.filter(conversation=conversation, role="assistant")
                            .order_by("id").first(), pinned=True)
        text = f"Turn {turn}: " + " ".join(WORDS[(turn + k) % len(WORDS)] for k in range(110))
        assert _send(user, conversation, text)[-1] == "done"

    latest = OptimizationRecord.objects.filter(conversation=conversation).order_by("-id").first()
    assert latest is not None and latest.window_start_id is not None, "the small window should move"
    places = _core_places(conversation, latest.window_start_id)
    assert {"static", "window", "evicted"} <= set(places.values())

    mp = owner_client.get(f"/api/dashboard/conversations/{conversation.pk}/map/").json()
    statuses = [mp["statuses"][code] for code, length in mp["status_runs"] for _ in range(length)]
    ids = [start + k for start, length in mp["id_runs"] for k in range(length)]
    by_id = dict(zip(ids, statuses, strict=True))
    for pk, place in places.items():
        if pk == latest.reply_id:
            continue  # written after the request: "new"
        status = by_id[pk]
        if place == "evicted":
            assert status in {"summarized", "dropped", "recalled"}, (pk, place, status)
        else:
            assert status in SENT, (pk, place, status)
    # the window moved past the system message and the pin, which the core still keeps
    pinned = Message.objects.get(conversation=conversation, pinned=True)
    system = Message.objects.get(conversation=conversation, role="system")
    assert pinned.pk < latest.window_start_id and system.pk < latest.window_start_id
    assert places[pinned.pk] == places[system.pk] == "static"
    assert by_id[pinned.pk] == "pinned" and by_id[system.pk] == "verbatim"
