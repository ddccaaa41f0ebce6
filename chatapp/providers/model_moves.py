"""The model of an owner's chats moving with their configs (providers.services: a config's model edited,
a config deleted, the default changed), said to whoever counts tokens for those chats: the chat app.
This app imports nothing of chat, so it says it with a signal."""

from __future__ import annotations

from django.dispatch import Signal

from chatapp.providers.models import LLMConfig

from .llm.types import OFFLINE_MODEL

# Sent when the model of some of an owner's chats changes without a chat being edited: their config's
# model was edited, their config was deleted (they follow the default then), or the default that chats
# without a config follow changed. Arguments: `owner_id`; `config_ids`, the chats on these configs;
# `followers`, also the chats on no config; `before` and `after`, the model names. The chat app marks
# their stored token counts as estimates when the tokenizer changed (chat.services.conversations_model_moved):
# this app imports nothing of chat.
chats_model_moved = Signal()


def chats_moved(*, owner_id: int, config_ids: tuple[int, ...], followers: bool, before: str, after: str) -> None:
    """Say that these chats' model moved from `before` to `after` (nothing when it did not)."""
    if before != after and (config_ids or followers):
        chats_model_moved.send(sender=LLMConfig, owner_id=owner_id, config_ids=config_ids, followers=followers,
                               before=before, after=after)


def default_model(*, owner_id: int) -> str:
    """The model chats on no config use: the owner's default config's, else the offline model."""
    default = LLMConfig.objects.filter(owner_id=owner_id, is_default=True)
    return default.values_list("model", flat=True).first() or OFFLINE_MODEL
