"""Images sent with a message: checked (type and size by their own bytes, the per-message count),
stored with the message, and shaped for the API. See image_models.MessageImage.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Prefetch
from django.urls import reverse

from chatapp.chat.image_models import IMAGE_NAME_MAX_CHARS, MessageImage
from chatapp.chat.models import Conversation, Message
from chatapp.chat.size_limits import TooLarge
from chatapp.chat.textsafe import text_storable
from optimizer.images import ImageInfo, image_info, image_tokens

IMAGE_TYPES_WORDS = "PNG, JPEG, WebP or GIF"
# A header may claim any size in a file of a few bytes (a PNG's up to 4,294,967,295 a side). Pillow
# refuses to decode past this many pixels (twice its MAX_IMAGE_PIXELS) as a decompression bomb, and so
# does an OpenAI-compatible server that reads images with it: such an image, kept in the history, failed
# every later turn of its chat; past 2**31 a side it was a 500 on PostgreSQL (an integer column).
MAX_IMAGE_PIXELS = 178_956_970


class ImageTooLarge(TooLarge):
    """An image over settings.MAX_IMAGE_BYTES (`limit` and `size` in bytes); nothing was stored."""

    @staticmethod
    def describe(*, limit: int, size: int) -> str:
        return f"An image is {size / 1e6:,.1f} MB; the largest an image may be is {limit / 1e6:,.1f} MB."


@dataclass(frozen=True, slots=True)
class ImageUpload:
    data: bytes
    info: ImageInfo
    name: str = ""


def _invalid(words: str) -> ValidationError:
    return ValidationError({"images": words}, code="invalid")


def _payload(item: Any) -> tuple[str, str]:
    """(base64 text, name) of one item: {"data": base64 or a data: URL, "name": optional}."""
    if not isinstance(item, dict) or not isinstance(item.get("data"), str):
        raise _invalid('Each image is an object with its file in "data" (base64, or a data: URL).')
    name = item.get("name", "")
    if not isinstance(name, str):
        raise _invalid("An image's name must be text.")
    data = item["data"]
    if data.startswith("data:"):
        # The URL's own type is the client's word: the bytes say what the file is.
        data = data.partition(",")[2]
    # A name is shown, never checked like a message's text: what no column stores is replaced, not refused.
    return data, text_storable(name.replace("\x00", ""))[:IMAGE_NAME_MAX_CHARS]


def images_validate(*, images: Any) -> list[ImageUpload]:
    """The images of a send as stored, or ValidationError / ImageTooLarge before anything is stored.
    `images`: None or a list of {"data": base64 or a data: URL, "name": the file's name}."""
    if images is None or images == []:
        return []
    if not isinstance(images, list):
        raise _invalid("Send the images as a list.")
    limit = settings.MAX_IMAGES_PER_MESSAGE
    if len(images) > limit:
        raise _invalid(f"A message may carry at most {limit} images; this one has {len(images)}.")
    uploads = []
    for item in images:
        text, name = _payload(item)
        # Refused on its base64 length before decoding, so an oversized file is never held twice.
        largest = settings.MAX_IMAGE_BYTES
        if len(text) * 3 // 4 > largest + 2:
            raise ImageTooLarge(limit=largest, size=len(text) * 3 // 4)
        try:
            data = base64.b64decode(text, validate=True)
        except (ValueError, binascii.Error):
            raise _invalid("An image is not valid base64.") from None
        if len(data) > largest:
            raise ImageTooLarge(limit=largest, size=len(data))
        info = image_info(data)
        if info is None:
            shown = f"{name} is" if name else "A file is"
            raise _invalid(f"{shown} not an image this chat takes ({IMAGE_TYPES_WORDS}).")
        if info.width * info.height > MAX_IMAGE_PIXELS:
            shown = name or "An image"
            raise _invalid(f"{shown} is {info.width:,} x {info.height:,} pixels; an image may have at most "
                           f"{MAX_IMAGE_PIXELS:,} pixels.")
        uploads.append(ImageUpload(data=data, info=info, name=name))
    return uploads


def images_tokens(uploads: Iterable[ImageUpload | MessageImage]) -> int:
    """What the images add to their message's stored count: OpenAI's cost at their size (the most a
    model that sees them is sent; a model that does not is sent a shorter text placeholder)."""
    total = 0
    for image in uploads:
        width, height = (
            (image.info.width, image.info.height) if isinstance(image, ImageUpload) else (image.width, image.height)
        )
        total += image_tokens(width, height)
    return total


def images_prefetch() -> Prefetch:
    """A page's messages' images, without their bytes (message_images_shape reads it)."""
    return Prefetch("images", queryset=MessageImage.objects.defer("data"))


def message_images_store(*, message: Message, uploads: Sequence[ImageUpload]) -> list[MessageImage]:
    return messages_images_store(stored=[(message, uploads)])


# Images per INSERT: an import stores a chunk's at once, and each may be MAX_IMAGE_BYTES.
_IMAGES_PER_INSERT = 16


def messages_images_store(*, stored: Sequence[tuple[Message, Sequence[ImageUpload]]]) -> list[MessageImage]:
    """Messages' images (each message with its uploads), inserted together, each chat flagged once (an
    import's: an insert per _IMAGES_PER_INSERT images, where a message at a time cost two statements)."""
    images = [
        MessageImage(message=message, mime=u.info.mime, width=u.info.width, height=u.info.height,
                     byte_count=len(u.data), name=u.name, data=u.data)
        for message, uploads in stored
        for u in uploads
    ]
    if not images:
        return []
    # The chat holds an image from now on: its turns and pages look for the images of what they show
    # (context_images, the timeline). The flag is never cleared, so a chat already known to hold one
    # (an import's, made with it set) needs no statement.
    unflagged = {
        message.conversation_id for message, uploads in stored
        if uploads and not (Message.conversation.is_cached(message) and message.conversation.has_images)
    }
    for conversation_id in unflagged:
        Conversation.objects.filter(pk=conversation_id, has_images=False).update(has_images=True)
    for message, uploads in stored:
        if uploads and Message.conversation.is_cached(message):  # a turn packs with this instance
            message.conversation.has_images = True
    return MessageImage.objects.bulk_create(images, batch_size=_IMAGES_PER_INSERT)


def message_images_copy(*, images: Sequence[MessageImage], message: Message) -> list[MessageImage]:
    """`images` (another message's) stored again as `message`'s: an edit keeps them, only its text is new."""
    return message_images_store(
        message=message,
        uploads=[
            ImageUpload(data=bytes(i.data), info=ImageInfo(i.mime, i.width, i.height), name=i.name) for i in images
        ],
    )


def image_facts(image: MessageImage) -> dict[str, Any]:
    """What the API and the exports say of an image besides its bytes."""
    return {
        "mime": image.mime,
        "width": image.width,
        "height": image.height,
        "bytes": image.byte_count,
        "name": image.name,
    }


def image_shape(image: MessageImage, *, url: str | None = None) -> dict[str, Any]:
    """One image in a message's API shape; `url` where it is read (the owner's endpoint by default)."""
    return {"id": image.pk, "url": url or reverse("api-image", args=[image.pk]), **image_facts(image)}


def message_images_shape(*, message: Message, images: Sequence[MessageImage] | None = None) -> list[dict[str, Any]]:
    """A message's images as the API shows them: only a user's message has any (no query for others);
    `images` when the caller has them, else read (a prefetch of `images` is used when there is one)."""
    if images is None:
        if message.role != Message.Role.USER or message.pk is None:
            return []
        prefetched = getattr(message, "_prefetched_objects_cache", {})
        images = prefetched["images"] if "images" in prefetched else list(message.images.defer("data"))
    return [image_shape(image) for image in images]
