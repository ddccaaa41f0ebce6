"""Rebuilding what a turn sent from its optimization record and the stored messages alone."""

from __future__ import annotations

from chatapp.chat.models import Message, OptimizationRecord


def record_rebuild(record: OptimizationRecord) -> list[dict]:
    """The messages a record says were sent, from its `sent` entries and the stored messages only.

    A recall entry is rebuilt from its `layout` (fixed text and quoted message ids); a compressed one
    carries its text; the others name the stored messages sent.
    """
    ids = {i for entry in record.sent for i in entry["source_ids"]}
    contents = dict(Message.objects.filter(pk__in=ids).values_list("id", "content"))
    rebuilt = []
    for entry in record.sent:
        if "layout" in entry:
            text = "".join(p if isinstance(p, str) else contents[p] for p in entry["layout"])
        else:
            text = entry.get("content") or "\n\n".join(contents[i] for i in entry["source_ids"])
        rebuilt.append({"role": entry["role"], "content": text})
    return rebuilt
