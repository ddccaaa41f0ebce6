"""Rebuilding what a turn sent from its optimization record and the stored messages alone."""

from __future__ import annotations

from chatapp.chat.models import Message, OptimizationRecord
from optimizer import PackedMessage
from optimizer.shape import shape_request


def record_rebuild(record: OptimizationRecord) -> list[dict]:
    """The messages a record says were sent, from its `sent` entries and the stored messages only.

    A recall entry is rebuilt from its `layout` (fixed text and quoted message ids); a compressed one
    carries its text; the others name the stored messages sent. The entries are the packed layout;
    the request on the wire is that layout shaped by `optimizer.shape` (one leading system message,
    roles alternating), which is deterministic, so it is applied here too.
    """
    ids = {i for entry in record.sent for i in entry["source_ids"]}
    contents = dict(Message.objects.filter(pk__in=ids).values_list("id", "content"))
    entries = []
    for entry in record.sent:
        if "layout" in entry:
            text = "".join(p if isinstance(p, str) else contents[p] for p in entry["layout"])
        else:
            text = entry.get("content") or "\n\n".join(contents[i] for i in entry["source_ids"])
        entries.append({**entry, "content": text})
    return entries_shaped(entries, model=record.model)


def entries_shaped(entries: list[dict], *, model: str) -> list[dict]:
    """Packed entries (role, content, origin, tokens, source_ids) as the request on the wire."""
    packed = [
        PackedMessage(e["role"], e["content"], tuple(map(str, e["source_ids"])), e["origin"], e["tokens"] or 0)
        for e in entries
    ]
    return shape_request(packed, model=model).messages
