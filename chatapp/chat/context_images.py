"""A packed request's images: the user's messages that carry some are sent as OpenAI content parts
(their text, then each image as a data: URL) to a model that sees images, and with a text placeholder
per image ("[image: 640x480]") to one that does not.

Put in after packing (context_pack.context_build), so only the images of the messages that are sent
are read, in one query, and only in a chat that holds an image (Conversation.has_images). A message's
stored count holds its images' cost as a seeing model is charged it (image_services.images_tokens):
for a model that does not see them the loaded messages are counted with their placeholders instead
before packing (`msgs_counted_as_sent`), or a question beside an image too large for the budget was
shortened to its text, and the model never told of the image. A message shortened to fit its share of
the budget is sent its placeholders, to a seeing model too, its text shortened again to make room
for them (`_shortened_for`): without them the model was never told there were images. A text too short to
keep any of it beside them is sent whole, a few tokens past its count.
"""

from __future__ import annotations

import base64
import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import optimizer
from chatapp.chat.image_models import MessageImage
from chatapp.chat.models import Message
from optimizer.images import image_tokens
from optimizer.truncation import SHORT_MARKER, compress_text, omitted_marker
from optimizer.types import Msg, PackedMessage

# What a message is sent as itself, whole (in the window, or pinned): its images go with it. A message
# shortened to fit its share of the budget ("compressed") was counted again from its shortened text
# alone: its images added would take the request past the budget, so it is sent their placeholders,
# its text shortened that much more, within the count the packer gave it (an image alone, shortened to
# no text, is sent its placeholders: a few tokens, not an empty message). A summary, or the recall
# block quoting a message, is text only.
_OWN_ORIGINS = ("verbatim", "pinned")


def image_placeholder(image: MessageImage) -> str:
    """The text an image is to a model that does not see it, and to the summarizer."""
    return f"[image: {image.width}x{image.height}]"


def image_part(image: MessageImage) -> dict[str, Any]:
    url = f"data:{image.mime};base64,{base64.b64encode(bytes(image.data)).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url}}


def _with_images(
    packed: PackedMessage, images: list[MessageImage], *, sees: bool, model: str, original: str | None,
) -> PackedMessage:
    """`original`: the text of the message `packed` is, as loaded (for one the packer shortened)."""
    text = packed.content if isinstance(packed.content, str) else optimizer.tokens.content_text(packed.content)
    text = text if text.strip() else ""  # an image sent alone: no empty text part, no blank line before it
    whole = packed.origin in _OWN_ORIGINS
    if sees and whole:
        head: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        # its stored count, its images' cost in it
        return dataclasses.replace(packed, content=[*head, *(image_part(i) for i in images)], tokens=packed.tokens)
    if whole:  # packed counted with its placeholders (msgs_counted_as_sent)
        return dataclasses.replace(packed, content=text + _placeholders_added(text, images), tokens=packed.tokens)
    # Shortened, it was counted without them: its text gives them room; an image alone (its text gone)
    # has none to give, and is sent its placeholders a few tokens past its count.
    shortened = text
    if text and original:
        shortened = _shortened_for(original=original, shortened=text, images=images, model=model)
    sent = shortened + _placeholders_added(shortened, images)
    tokens = packed.tokens - optimizer.count_text(text, model=model) + optimizer.count_text(sent, model=model)
    return dataclasses.replace(packed, content=sent, tokens=max(tokens, 1))


def _shortened_for(*, original: str, shortened: str, images: Sequence[MessageImage], model: str) -> str:
    """`original` shortened again as the packer shortened it to `shortened` (head and tail around the
    marker, `compress_text`), so that it and its images' placeholders count no more than `shortened`."""
    room = optimizer.count_text(shortened, model=model)
    limit = room - optimizer.count_text(_placeholders_added(shortened, images), model=model)
    # What compress_text sends at a limit too small for any of the text: a marker alone, no question.
    marker_alone = {"", SHORT_MARKER, omitted_marker(lines=None, tokens=optimizer.count_text(original, model=model))}
    while limit > 0:
        text = compress_text(original, limit=limit, model=model)
        if text in marker_alone:
            break
        over = optimizer.count_text(text + _placeholders_added(text, images), model=model) - room
        if over <= 0:
            return text
        limit -= over  # the two counted apart are a token or so short of the two together
    # No shortening that keeps some of it leaves room for them. A question the packer kept whole (about
    # as short as its images' placeholders, the message "shortened" for its images alone) is sent whole,
    # a few tokens past its count as an image alone's placeholders are: dropped (or a marker alone), the
    # model was sent the placeholders without the question. One the packer cut to a share this small
    # (the rest of the request fills the budget) gives way to them, the budget kept.
    return shortened if shortened == original else ""


def _placeholders_added(text: str, images: Sequence[MessageImage]) -> str:
    """What a model that does not see `images` is sent after the message's `text`."""
    placeholders = "\n".join(image_placeholder(i) for i in images)
    return f"\n\n{placeholders}" if text.strip() else placeholders


def images_overcount(*, conversation_id: int, model: str) -> dict[str, int]:
    """How far each live message's stored count (ids as strings) exceeds what a model that does not see
    images is sent: its images' cost less their placeholders', which the running totals
    (Conversation.live_token_count) cannot tell. Each placeholder counted with the line break that puts
    it after text (an image alone has none): never more than is saved, so the history is never read as
    smaller than it is sent. An estimate (the message's text and its placeholders are counted as one
    text when sent); the caller swaps in the exact figure (overcounts_as_sent) for the messages it loads.
    One query, over the images only."""
    rows = MessageImage.objects.filter(
        message__conversation_id=conversation_id, message__role=Message.Role.USER, message__kind=Message.Kind.CHAT,
        message__status__in=Message.LIVE_STATUSES, message__superseded=False,
    ).values_list("message_id", "width", "height")
    found: defaultdict[str, int] = defaultdict(int)
    for message_id, width, height in rows:
        placeholder = image_placeholder(MessageImage(width=width, height=height))
        saved = image_tokens(width, height) - optimizer.count_text(f"\n\n{placeholder}", model=model)
        found[str(message_id)] += max(saved, 0)
    return dict(found)


def overcounts_as_sent(
    stored: Sequence[Msg], counted: Sequence[Msg], *, estimates: Mapping[str, int]
) -> dict[str, int]:
    """By message id, how far each live message's stored count exceeds what a model that does not see
    images is sent: the loaded ones (`stored`, `counted` by msgs_counted_as_sent) exactly, the others by
    `estimates` (images_overcount), as the full history is counted. The tokens a turn drops are counted
    so too (turn_records.record_dropped_ranges), not with the images' cost."""
    loaded = {s.id for s in stored}
    exact = {s.id: s.tokens - (c.tokens or 0) for s, c in zip(stored, counted, strict=True)
             if s.tokens is not None and s.tokens != c.tokens}
    return {**{pk: n for pk, n in estimates.items() if pk not in loaded}, **exact}


def msgs_counted_as_sent(msgs: Sequence[Msg], *, model: str) -> list[Msg]:
    """`msgs` (loaded for a model that does not see images) with each user message that has images
    counted as it is sent, its text with their placeholders (its stored count holds the images' cost).
    One query, for the loaded messages only."""
    ids = [int(m.id) for m in msgs if m.role == "user" and m.id.isdigit()]
    found: defaultdict[str, list[MessageImage]] = defaultdict(list)
    for message_id, width, height in (
        MessageImage.objects.filter(message_id__in=ids).order_by("id").values_list("message_id", "width", "height")
        if ids else ()
    ):
        found[str(message_id)].append(MessageImage(width=width, height=height))
    counted = []
    for m in msgs:
        images = found.get(m.id)
        if images:
            text = m.content if isinstance(m.content, str) else optimizer.tokens.content_text(m.content)
            sent = (text if text.strip() else "") + _placeholders_added(text, images)  # as _with_images sends it
            m = dataclasses.replace(m, tokens=optimizer.count_message({"role": m.role, "content": sent}, model=model))
        counted.append(m)
    return counted


def _own_id(packed: PackedMessage) -> str | None:
    """The id of the user's message `packed` is, sent as itself or shortened to fit its share; None for
    anything else."""
    own = packed.role == "user" and packed.origin in (*_OWN_ORIGINS, "compressed") and len(packed.source_ids) == 1
    return packed.source_ids[0] if own and packed.source_ids[0].isdigit() else None


def packed_images_attach(
    packed: Sequence[PackedMessage], *, sees: bool, model: str, loaded: Sequence[Msg],
) -> list[PackedMessage]:
    """`packed` with the images of the user's messages in it put in (see the module docstring);
    `loaded`: the messages it was packed from (a shortened one is shortened again from its text)."""
    ids = [int(own) for p in packed if (own := _own_id(p)) is not None]
    found: defaultdict[str | None, list[MessageImage]] = defaultdict(list)
    rows = MessageImage.objects.filter(message_id__in=ids).order_by("id")
    for image in (rows if sees else rows.defer("data")) if ids else ():
        found[str(image.message_id)].append(image)
    shortened = {p.source_ids[0] for p in packed if p.origin == "compressed" and _own_id(p) in found}
    originals = {m.id: optimizer.tokens.content_text(m.content) for m in loaded if m.id in shortened}
    return [
        _with_images(p, found[own], sees=sees, model=model, original=originals.get(own or ""))
        if (own := _own_id(p)) in found else p
        for p in packed
    ]


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
            placeholders = "\n".join(sizes[message.pk])
            message.content = f"{message.content}\n\n{placeholders}" if message.content else placeholders
    return messages
