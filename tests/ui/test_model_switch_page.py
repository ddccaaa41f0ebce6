"""The chat header's model selector, as the server renders it."""

from __future__ import annotations

import re

import pytest

from chatapp.chat.models import Conversation
from chatapp.providers.models import LLMConfig

pytestmark = pytest.mark.django_db


def _config(owner, name, *, window=16000, default=False):
    return LLMConfig.objects.create(
        owner=owner, name=name, base_url="https://api.example.com/v1", model=f"model-{name.lower()}",
        context_window=window, max_output_tokens=1000, is_default=default,
    )


def _options(body: str) -> list[tuple[str, str, bool]]:
    select = body.split('id="model-select"', 1)[1].split("</select>", 1)[0]
    return [
        (value, label, bool(selected))
        for value, selected, label in re.findall(r'<option value="(\d+)"[^>]*?( selected)?>([^<]*)</option>', select)
    ]


def test_an_existing_chat_offers_every_config_with_its_own_selected(page, user, other_user):
    default = _config(user, "Default", default=True)
    big = _config(user, "Big", window=128000)
    _config(other_user, "Foreign", default=True)
    conversation = Conversation.objects.create(owner=user, title="Chat", llm_config=big)

    body = page.get(f"/c/{conversation.pk}/").content.decode()

    options = _options(body)
    assert [(label, selected) for _, label, selected in options] == [("Big", True), ("Default", False)]
    assert {int(v) for v, _, _ in options} == {default.pk, big.pk}
    assert f'data-current="{big.pk}"' in body
    assert "Foreign" not in body


def test_a_chat_following_the_default_shows_the_default_selected(page, user):
    default = _config(user, "Default", default=True)
    _config(user, "Other")
    conversation = Conversation.objects.create(owner=user, title="Chat")

    options = _options(page.get(f"/c/{conversation.pk}/").content.decode())

    assert [int(v) for v, _, selected in options if selected] == [default.pk]


def test_without_a_config_there_is_nothing_to_switch(page, user):
    conversation = Conversation.objects.create(owner=user, title="Chat", offline=True)
    body = page.get(f"/c/{conversation.pk}/").content.decode()
    assert 'id="model-select"' not in body
    assert "Offline demo model" in body


def test_an_offline_chat_stays_offline_when_a_model_is_added_and_can_switch_either_way(page, user):
    conversation = Conversation.objects.create(owner=user, title="Chat", offline=True)
    only = _config(user, "Only", default=True)

    body = page.get(f"/c/{conversation.pk}/").content.decode()

    # the new config is offered, the offline model stays selected (issue 14, finding 8)
    assert [(int(v), selected) for v, _, selected in _options(body)] == [(only.pk, False)]
    assert re.search(r'<option value="offline" selected>Offline demo model</option>', body)
    assert 'data-current="offline"' in body
