"""Recall of a message that carries images: its quote is the message's text, so it is sized by that text,
not by the stored count (which holds the images' cost, as a model that sees them is charged)."""

from __future__ import annotations

import pytest

from chatapp.chat.image_services import ImageUpload, images_tokens, message_images_store
from chatapp.chat.message_services import message_append
from chatapp.chat.recall_source import DatabaseRecallSource
from optimizer.images import ImageInfo
from optimizer.recall import recall
from tests.support.images import png_bytes

pytestmark = pytest.mark.django_db

FACT = "Here is the screenshot: the build fails with ImportError in module frobnicator after the upgrade."
QUESTION = "What was the frobnicator error again?"


def test_a_message_with_images_is_quoted_when_its_text_fits(user, conversation):
    upload = ImageUpload(data=png_bytes(), info=ImageInfo("image/png", 2048, 2048), name="shot.png")
    fact = message_append(conversation=conversation, role="user", content=FACT,
                          extra_tokens=images_tokens([upload]))
    message_images_store(message=fact, uploads=[upload])
    message_append(conversation=conversation, role="assistant", content="Reinstall the package and retry.")
    for i in range(6):
        message_append(conversation=conversation, role="user" if i % 2 == 0 else "assistant",
                       content=f"unrelated chatter number {i} about the weather and lunch")
    conversation.refresh_from_db()
    assert fact.token_count > 600  # the stored count holds the image's cost

    block = recall(text=QUESTION, source=DatabaseRecallSource(conversation=conversation), room=200,
                   exclude_ids=frozenset(), model="gpt-4o")

    # Its text is some 30 tokens, which the room holds: quoted, and the block within the room.
    assert block is not None and str(fact.pk) in block.source_ids
    assert FACT in block.content and block.tokens <= 200
