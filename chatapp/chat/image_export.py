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

# The most image bytes a JSON export, or a long branch's job, reads at once: a page's images are read
# without their bytes, then the bytes of a run of messages at a time (image_runs). A page of 500
# messages read with its images held every photo of it at once (hundreds of MB in one chunk, for a
# Markdown export that prints only their names), where the exports promise a flat memory.
IMAGE_RUN_BYTES = 8_000_000


def page_images_add(rows: list[dict[str, Any]], *, with_bytes: bool = True) -> list[dict[str, Any]]:
    """`rows` (message values in id order) each with its `images` (with their bytes, base64 at the last
    moment: image_values; `with_bytes` False: without, read by images_bytes); one query for the page."""
    ids = [row["id"] for row in rows if row["role"] == Message.Role.USER]
    found: defaultdict[int, list[MessageImage]] = defaultdict(list)
    images = MessageImage.objects.filter(message_id__in=ids).order_by("id")
    for image in (images if with_bytes else images.defer("data")) if ids else ():
        found[image.message_id].append(image)
    for row in rows:
        row["images"] = found.get(row["id"], [])
    return rows


def image_runs(rows: Sequence[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """`rows` (each with its `images`) in consecutive runs whose images hold at most IMAGE_RUN_BYTES
    together; a message whose own images hold more is a run of its own."""
    run: list[dict[str, Any]] = []
    held = 0
    for row in rows:
        size = sum(image.byte_count for image in row["images"])
        if run and held + size > IMAGE_RUN_BYTES:
            yield run
            run, held = [], 0
        run.append(row)
        held += size
    if run:
        yield run


def images_bytes(*, rows: Iterable[dict[str, Any]]) -> dict[int, bytes]:
    """The bytes of the images of `rows` (read without them), by image id: one query (none without
    images). An image deleted since its page was read (with its chat) is not in it."""
    ids = [image.pk for row in rows for image in row["images"]]
    if not ids:
        return {}
    return {pk: bytes(data) for pk, data in MessageImage.objects.filter(pk__in=ids).values_list("id", "data")}


def rows_with_images(
    rows: Iterable[dict[str, Any]], *, size: int
) -> Iterator[tuple[dict[str, Any], dict[int, bytes]]]:
    """`rows` as they come, each with its `images` (`size` rows a query, without their bytes) and the
    bytes of its run's images (image_runs: a run's at a time, never a batch's)."""
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield from _with_bytes(batch)
            batch = []
    yield from _with_bytes(batch)


def _with_bytes(batch: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[int, bytes]]]:
    for run in image_runs(page_images_add(batch, with_bytes=False)):
        found = images_bytes(rows=run)
        for row in run:
            # An image deleted meanwhile (its chat too) is left out, as a read of the batch left it out.
            row["images"] = [image for image in row["images"] if image.pk in found]
            yield row, found


def image_values(image: MessageImage, *, data: bytes | None = None) -> dict[str, Any]:
    """An image in our JSON; `data`: its bytes where it was read without them (images_bytes)."""
    return {**image_facts(image), "data": base64.b64encode(bytes(image.data if data is None else data)).decode("ascii")}


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
