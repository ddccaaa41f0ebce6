"""A user message's images in exports, forks and imports: in our JSON each one is
`{"name", "mime", "width", "height", "bytes", "data"}` (`data`: the file, base64), so an import (or a
branch into a new chat, which goes through the import) restores them; Markdown says
"[image: name WxH]" in each one's place. The import checks each file as a send does
(image_services.images_validate): its type and size by its own bytes, the per-message limits."""

from __future__ import annotations

import base64
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.core.exceptions import ValidationError

from chatapp.chat.image_models import MessageImage
from chatapp.chat.image_services import ImageUpload, image_facts, images_validate, messages_images_store
from chatapp.chat.imports.records import ConversationError
from chatapp.chat.models import Message


def page_images_add(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` (message values in id order) each with its `images` (its files' bytes, base64 at the
    last moment: image_values); one query for the page."""
    ids = [row["id"] for row in rows if row["role"] == Message.Role.USER]
    found: defaultdict[int, list[MessageImage]] = defaultdict(list)
    for image in MessageImage.objects.filter(message_id__in=ids).order_by("id") if ids else ():
        found[image.message_id].append(image)
    for row in rows:
        row["images"] = found.get(row["id"], [])
    return rows


def rows_with_images(rows: Iterable[dict[str, Any]], *, size: int) -> Iterator[dict[str, Any]]:
    """`rows` as they come, each with its `images` (page_images_add, `size` rows a query)."""
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield from page_images_add(batch)
            batch = []
    yield from page_images_add(batch)


def image_values(image: MessageImage) -> dict[str, Any]:
    return {**image_facts(image), "data": base64.b64encode(bytes(image.data)).decode("ascii")}


# What in a name would be Markdown, not text: a "]" closed the bracket, "](url)" made a link, "*" or
# "_" emphasis, "<" HTML, "&" an entity, a backslash an escape of what follows it.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]()<>!&~|#])")


def _markdown_text(name: str) -> str:
    """`name` (any text the browser sent) as plain text on one line: a break would end the line."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(name.split()))


def images_markdown(images: Sequence[MessageImage]) -> str:
    """The images as a Markdown export shows them, one a line."""
    return "  \n".join(
        f"[image: {f'{_markdown_text(i.name)} ' if i.name.strip() else ''}{i.width}x{i.height}]" for i in images)


def images_parse(value: Any, *, what: str) -> list[ImageUpload]:
    """A message's `images` in our JSON, checked as a send's are; ConversationError naming `what`."""
    if value is None:
        return []
    if isinstance(value, list):
        value = [{"data": i.get("data"), "name": i.get("name") or ""} if isinstance(i, dict) else i for i in value]
    try:
        return images_validate(images=value)
    except ValidationError as exc:
        raise ConversationError(f"{what}'s images: {' '.join(exc.messages)}") from None


def imported_images_store(*, rows: Sequence[Message], images: Sequence[list[ImageUpload]]) -> None:
    """Each stored row's images (`images[k]` are `rows[k]`'s)."""
    messages_images_store(stored=list(zip(rows, images, strict=True)))
