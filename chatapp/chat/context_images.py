"""A packed request's images: the user's messages that carry some are sent as OpenAI content parts
(their text, then each image as a data: URL) to a model that sees images, and with a text placeholder
per image ("[image: 640x480]") to one that does not.

Put in after packing (context_pack.context_build), so only the images of the messages that are sent
are read, in one query, and only in a chat that holds an image (Conversation.has_images). The
optimizer packed with each message's stored count, which holds its images' cost as a seeing model is
charged it (image_services.images_tokens): for a model that does not see them the packed message's
count is brought down to its placeholders'.
"""

from __future__ import annotations

import base64
import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import optimizer
from chatapp.chat.image_models import MessageImage
from chatapp.chat.image_services import images_tokens
from chatapp.chat.models import Message
from optimizer.types import PackedMessage

# What a message is sent as itself, whole (in the window, or pinned): its images go with it. A message
# shortened to fit its share of the budget ("compressed") was counted again from its shortened text
# alone, and is sent as the packer counted it: its images added would take the request past the
# budget. A summary, or the recall block quoting a message, is text only.
_OWN_ORIGINS = ("verbatim", "pinned")


def image_placeholder(image: MessageImage) -> str:
    """The text an image is to a model that does not see it, and to the summarizer."""
    return f"[image: {image.width}x{image.height}]"


def image_part(image: MessageImage) -> dict[str, Any]:
    url = f"data:{image.mime};base64,{base64.b64encode(bytes(image.data)).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url}}


def _with_images(packed: PackedMessage, images: list[MessageImage], *, sees: bool, model: str) -> PackedMessage:
    text = packed.content if isinstance(packed.content, str) else optimizer.tokens.content_text(packed.content)
    tokens = packed.tokens  # its stored count, its images' cost in it
    if sees:
        parts: list[dict[str, Any]] = [{"type": "text", "text": text}, *(image_part(i) for i in images)]
        return dataclasses.replace(packed, content=parts, tokens=tokens)
    placeholders = "\n".join(image_placeholder(i) for i in images)
    tokens += optimizer.count_text("\n\n" + placeholders, model=model) - images_tokens(images)
    return dataclasses.replace(packed, content=f"{text}\n\n{placeholders}", tokens=max(tokens, 1))


def _own_id(packed: PackedMessage) -> str | None:
    """The id of the user's message `packed` is, sent as itself; None for anything else."""
    own = packed.role == "user" and packed.origin in _OWN_ORIGINS and len(packed.source_ids) == 1
    return packed.source_ids[0] if own and packed.source_ids[0].isdigit() else None


def packed_images_attach(packed: Sequence[PackedMessage], *, sees: bool, model: str) -> list[PackedMessage]:
    """`packed` with the images of the user's messages in it put in (see the module docstring)."""
    ids = [int(own) for p in packed if (own := _own_id(p)) is not None]
    found: defaultdict[str | None, list[MessageImage]] = defaultdict(list)
    rows = MessageImage.objects.filter(message_id__in=ids).order_by("id")
    for image in (rows if sees else rows.defer("data")) if ids else ():
        found[str(image.message_id)].append(image)
    return [_with_images(p, found[own], sees=sees, model=model) if (own := _own_id(p)) in found else p for p in packed]


def messages_with_placeholders(messages: list[Message], *, has_images: bool = True) -> list[Message]:
    """`messages` (as read, never saved) with a placeholder per image after a user message's text: what
    a summary is written from, text only, yet knowing an image was there and its size. Nothing is read
    for a chat that holds no image (`has_images`: Conversation.has_images)."""
    ids = [m.pk for m in messages if m.role == Message.Role.USER] if has_images else []
    sizes: defaultdict[int, list[str]] = defaultdict(list)
    for message_id, width, height in (
        MessageImage.objects.filter(message_id__in=ids).order_by("id").values_list("message_id", "width", "height")
        if ids
        else ()
    ):
        sizes[message_id].append(image_placeholder(MessageImage(width=width, height=height)))
    for message in messages:
        if message.pk in sizes:
            message.content = f"{message.content}\n\n" + "\n".join(sizes[message.pk])
    return messages
