"""One turn in detail (\"what the model saw\": every sent entry with its source, recall and summary),
the record list and the summaries card.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404

import optimizer
from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob
from chatapp.dashboard.costs import as_float
from chatapp.dashboard.figures import (
    dashboard_message_numbers,
    dashboard_record_rows,
    dashboard_record_turn,
    dashboard_totals_get,
)
from chatapp.dashboard.ledger import SummaryScan, ledger_read

RECORD_LIST_FIELDS = (
    "id", "created_at", "reply_id", "preference", "model", "context_window", "budget", "triggered",
    "window_start_id", "strategy", "reason", "tokens_full", "tokens_sent", "provider_prompt_tokens",
    "estimated", "summary_id", "messages_before", "messages_after", "pack_ms", "cost_sent_usd",
    "cost_full_usd", "recall_tokens", "recall_message_count",
)


def dashboard_record_list(*, conversation: Conversation) -> QuerySet:
    """A conversation's records in turn order, without the heavy JSON columns (paginate it)."""
    return OptimizationRecord.objects.filter(conversation=conversation).order_by("id").values(*RECORD_LIST_FIELDS)


def dashboard_record_page(*, conversation: Conversation, offset: int, limit: int) -> tuple[int, list[dict]]:
    """How many records the conversation holds (stored: no count) and `limit` records from `offset`
    in turn order, reached through their turn block (no rows skipped)."""
    turns = dashboard_totals_get(conversation=conversation).turns
    rows = dashboard_record_rows(
        conversation=conversation, offset=offset, limit=limit,
        fields=(*RECORD_LIST_FIELDS, "reply__superseded", "reply__status"),
    )
    for row in rows:
        # A turn whose reply an edit, a regenerate or a branch switch took off the active path (issue
        # 13): its cost was paid and stays in the totals, but its context was another branch's.
        row["on_active_path"] = not row.pop("reply__superseded")
        # A turn whose reply failed reads otherwise like one answered: say how it ended.
        row["reply_status"] = row.pop("reply__status")
    return turns, rows


SUMMARY_LIST_FIELDS = (
    "id", "content", "token_count", "char_count", "covers_from_id", "covers_through_id", "covered_message_count",
    "source_chars", "extractive", "discarded", "edited", "edited_from_id", "model", "cost_usd", "created_at",
    "superseded",
)


def dashboard_summary_list(*, conversation: Conversation) -> QuerySet:
    """Summary messages, newest first (paginate it, then decorate the page with dashboard_summary_details)."""
    return (
        Message.objects.filter(conversation=conversation, kind=Message.Kind.SUMMARY)
        .order_by("-id")
        .values(*SUMMARY_LIST_FIELDS)
    )


def dashboard_summary_page(
    *, conversation: Conversation, offset: int, limit: int, before: int | None = None
) -> tuple[int, list[dict], int | None]:
    """How many summaries the conversation holds, one page of them, newest first, decorated, and the id
    the next page is `before` (None: this is the last). `before`: only summaries older than that id, so
    one written meanwhile shifts no later page. The ids come from the message ledger (in id order), so
    the page is read by primary key (no count, no scan)."""
    scan = ledger_read(conversation_id=conversation.pk)
    older = scan.ids if before is None else scan.ids[: bisect_left(scan.ids, before)]
    ids = older[::-1][offset : offset + limit + 1]
    next_before = ids[limit - 1] if len(ids) > limit else None
    ids = ids[:limit]
    rows = sorted(
        Message.objects.filter(conversation=conversation, pk__in=ids).values(*SUMMARY_LIST_FIELDS),
        key=lambda r: -r["id"],
    )
    return len(scan.ids), dashboard_summary_details(conversation=conversation, summaries=rows, scan=scan), next_before


def dashboard_summary_details(*, conversation: Conversation, summaries: list[dict],
                              scan: SummaryScan | None = None) -> list[dict]:
    """Attach each summary's job (duration, cost, model), how many requests used it and users' numbers:
    a few queries per page, plus reading the conversation's summaries (ledger_read) unless `scan` is given."""
    ids = [s["id"] for s in summaries]
    jobs = {
        j["summary_id"]: j
        for j in SummaryJob.objects.filter(conversation=conversation, summary_id__in=ids).values(
            "id", "summary_id", "model", "cost_usd", "prompt_tokens", "completion_tokens", "trigger",
            "started_at", "finished_at", "error",
        )
    }
    used = dict(
        # The ids are this conversation's summaries: filtering on them alone lets the summary_id index serve.
        OptimizationRecord.objects.filter(summary_id__in=ids)
        .values("summary_id")
        .annotate(n=Count("id"))
        .values_list("summary_id", "n")
    )
    scan = scan or ledger_read(conversation_id=conversation.pk)
    ordinals = scan.numbers
    # The summary the next request sends, as context_load picks it: the newest neither discarded nor on
    # another branch (an edit or a switch took what it covers off the path). Only it can be edited.
    in_use = (
        Message.objects.filter(conversation=conversation, kind=Message.Kind.SUMMARY, discarded=False, superseded=False)
        .order_by("-id").values_list("id", flat=True).first()
    )
    numbers = dashboard_message_numbers(
        conversation_id=conversation.pk,
        ids=[i for s in summaries for i in (s["covers_from_id"], s["covers_through_id"]) if i is not None],
        scan=scan,
    )
    out = []
    for s in summaries:
        job = jobs.get(s["id"])
        duration = None
        if job and job["started_at"] and job["finished_at"]:
            duration = (job["finished_at"] - job["started_at"]).total_seconds()
        cost = job["cost_usd"] if job and job["cost_usd"] is not None else s["cost_usd"]
        model = (job["model"] if job else "") or s["model"]
        out.append({
            **s,
            "in_use": s["id"] == in_use,
            "on_active_path": not s.pop("superseded"),
            "cost_usd": as_float(cost),
            "method": "extractive" if s["extractive"] else (model or "model"),
            "model": model,
            "job_id": job["id"] if job else None,
            "trigger": job["trigger"] if job else None,
            # Why the job wrote it without the model (the model kept failing, or refused): the
            # extractive fallback's note (summary_runner), "" for a summary the model wrote.
            "job_note": job["error"] if job else "",
            "duration_s": duration,
            "prompt_tokens": job["prompt_tokens"] if job else None,
            "completion_tokens": job["completion_tokens"] if job else None,
            "used_by_requests": used.get(s["id"], 0),
            # Users' numbering (selectors.message_numbers) and the one character count: the body's,
            # as the summary's own header says.
            "number": ordinals.get(s["id"]),
            "edited_from_number": ordinals.get(s["edited_from_id"]),
            "covers_from_number": numbers.get(s["covers_from_id"]),
            "covers_through_number": numbers.get(s["covers_through_id"]),
            "summary_chars": len(optimizer.summary_body(s["content"])),
        })
    return out


def _int_ids(values: Any) -> list[int]:
    out = []
    for value in values or []:
        try:
            out.append(int(value))
        except (TypeError, ValueError):
            continue
    return out


def _entry_source_ids(entry: dict[str, Any], *, record: OptimizationRecord) -> list[int]:
    """The stored messages whose text stands for one `sent` entry.

    A summary entry names its summary message (`summary_id`); records written before that key
    existed carry the optimizer's last covered id in `source_ids`, so they fall back to the summary
    the record used.
    """
    if entry.get("origin") == "summary":
        summary_id = _int_ids([entry.get("summary_id") or record.summary_id])
        if summary_id:
            return summary_id
    return _int_ids(entry.get("source_ids"))


def _recall_text(entry: dict[str, Any], messages: dict[int, dict[str, Any]]) -> tuple[str, bool]:
    """A recall entry's text as sent, and whether that is exact (False: a quoted message is gone).

    The record keeps either the text itself or its `layout`: the pieces around the quotes with each
    quoted message's id in its place (turn_records._recall_layout), which the stored contents fill.
    """
    if isinstance(entry.get("content"), str):
        return entry["content"], True
    parts: list[str] = []
    exact = True
    for part in entry.get("layout") or []:
        if isinstance(part, str):
            parts.append(part)
        elif part in messages:
            parts.append(messages[part]["content"])
        else:
            exact = False
            parts.append(f"[message #{part} is no longer stored]")
    return "".join(parts), exact


def _recall_details(entry: dict[str, Any], source_ids: list[int],
                    messages: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Why a recall block quoted what it did: the query terms and, per quoted message, whether the
    search matched it (a hit) or it came along as a hit's neighbour."""
    hit_ids = _int_ids(entry.get("hit_ids"))
    rank = {pk: k for k, pk in enumerate(hit_ids, start=1)}
    quotes = []
    for pk in source_ids:
        m = messages.get(pk)
        quotes.append({
            "id": pk,
            "role": m["role"] if m else None,
            "created_at": m["created_at"].isoformat() if m and m["created_at"] else None,
            "tokens": m["token_count"] if m else None,
            "hit": pk in rank,
            # 1 = the best match.
            "rank": rank.get(pk),
        })
    return {"terms": [str(t) for t in entry.get("terms") or []], "hit_ids": hit_ids, "quotes": quotes}


def dashboard_record_context(*, conversation: Conversation, record_id: int) -> dict[str, Any]:
    """What the model saw on one turn: the sent messages in order with their tokens and origin.

    Rebuilt from the record's `sent` list and the stored messages (the summary is a message too,
    and an edit never changes it: it makes a new one). A compressed entry shows the head + tail text
    the record kept; records written before it kept that show the original, with both token counts.
    A recall entry is rebuilt from its layout and the quoted messages, exactly as sent, and says why
    (`recall`: the query terms and which quotes were hits).
    """
    record = get_object_or_404(OptimizationRecord, conversation=conversation, pk=record_id)
    sent = record.sent or []
    per_entry = [_entry_source_ids(entry, record=record) for entry in sent]
    wanted = {i for ids in per_entry for i in ids}
    if record.summary_id:
        wanted.add(record.summary_id)
    messages: dict[int, Any] = {
        m["id"]: m
        for m in Message.objects.filter(conversation=conversation, pk__in=wanted).values(
            "id", "role", "kind", "content", "token_count", "pinned", "created_at", "updated_at", "edited",
            "edited_from_id", "covers_from_id", "covers_through_id", "covered_message_count",
        )
    }
    summary_ids = [i for i, m in messages.items() if m["kind"] == Message.Kind.SUMMARY]
    # By edited_from_id alone: an edit lives in its original's conversation, and naming the
    # conversation too led SQLite's planner to walk all of a long one's messages (43 ms at 100,000).
    replaced_by = dict(
        Message.objects.filter(edited_from_id__in=summary_ids).values_list("edited_from_id", "id")
    ) if summary_ids else {}
    entries = []
    for position, (entry, source_ids) in enumerate(zip(sent, per_entry, strict=True), start=1):
        found = [messages[i] for i in source_ids if i in messages]
        origin = entry.get("origin", "verbatim")
        first = found[0] if found else None
        # A compressed message's head + tail, a system prompt, a message sent with its images'
        # placeholders (no row holds any of these): the record kept the text.
        kept = entry.get("content")
        sent_text = kept if isinstance(kept, str) and origin != "recall" else None
        exact = sent_text is not None or origin != "compressed"
        recall = None
        if origin == "recall":
            sent_text, exact = _recall_text(entry, messages)
            recall = _recall_details(entry, source_ids, messages)
        summary_first = first if first is not None and first["kind"] == Message.Kind.SUMMARY else None
        entries.append({
            "position": position,
            "origin": origin,
            "tokens": entry.get("tokens"),
            "source_ids": source_ids,
            # A recall block is one system message whatever its quotes' roles.
            "role": entry.get("role", "system") if recall else first["role"] if first else entry.get("role", "system"),
            "content": sent_text if sent_text is not None else "\n\n".join(m["content"] for m in found),
            "original_tokens": sum(m["token_count"] for m in found),
            "compressed": origin == "compressed",
            # Images sent beside the text (to a model that sees them; one that does not got placeholders
            # in `content`): their cost is in `tokens`.
            "images": int(entry.get("images") or 0),
            # Whether `content` is exactly the text sent (False: a compressed message's original is
            # shown, or a recalled message is no longer stored).
            "content_is_sent_text": exact,
            "recall": recall,
            # "instructions" (the user's custom instructions) or "conversation" (the chat's system prompt).
            "system_prompt": entry.get("system_prompt"),
            "missing": len(found) < len(source_ids),
            # Summaries once were edited in place, so the text shown may be newer than the one sent.
            # Today an edit is a new message, and discarding touches updated_at without changing text.
            "edited_after": any(
                m["edited"] and m["edited_from_id"] is None and m["updated_at"] > record.created_at for m in found
            ),
            # The sent summary was a user's edit of an earlier one.
            "edited": bool(summary_first is not None and summary_first["edited"]),
            # The edit that replaced this summary after this request (the text shown is still what was sent).
            "replaced_by_id": replaced_by.get(summary_first["id"]) if summary_first is not None else None,
            "covers": (
                [summary_first["covers_from_id"], summary_first["covers_through_id"],
                 summary_first["covered_message_count"]]
                if summary_first is not None else None
            ),
        })
    summary = messages.get(record.summary_id) if record.summary_id else None
    entry_tokens = sum(e["tokens"] or 0 for e in entries)
    recalled_ids = sorted({i for e in entries if e["recall"] for i in e["source_ids"]})
    totals = dashboard_totals_get(conversation=conversation)  # current, so the turn blocks are too
    scan = ledger_read(conversation_id=conversation.pk, totals=totals)
    ordinals = scan.numbers
    shown = {i for e in entries if e["origin"] != "summary" for i in e["source_ids"]}
    shown.update(i for e in entries if e["covers"] for i in e["covers"][:2] if i is not None)
    shown.update(i for pair in record.dropped_ranges or [] for i in _int_ids(pair[:2]))
    # And the id before each range: a range can start at a summary's id, which is numbered as the
    # message before it, so the page tells that case by an unchanged number and starts one later.
    shown.update(pair[0] - 1 for pair in record.dropped_ranges or [] if isinstance(pair[0], int) and pair[0] > 1)
    if record.window_start_id:
        shown.add(record.window_start_id)
    numbers = dashboard_message_numbers(conversation_id=conversation.pk, ids=shown, scan=scan)
    # How its reply ended, and whether it is on the path shown (as the records list says both).
    reply = (Message.objects.filter(pk=record.reply_id).values_list("status", "superseded").first()
             if record.reply_id else None) or (None, False)
    return {
        "record": {
            "id": record.pk,
            "turn": dashboard_record_turn(conversation=conversation, record_id=record.pk),
            "created_at": record.created_at.isoformat(),
            "reply_id": record.reply_id,
            "reply_status": reply[0],
            "on_active_path": not reply[1],
            "preference": record.preference,
            "model": record.model,
            "context_window": record.context_window,
            "budget": record.budget,
            "triggered": record.triggered,
            "window_start_id": record.window_start_id,
            "strategy": record.strategy,
            "reason": record.reason,
            "scores": record.scores,
            "tokens_full": record.tokens_full,
            "tokens_sent": record.tokens_sent,
            "provider_prompt_tokens": record.provider_prompt_tokens,
            "estimated": record.estimated,
            "messages_before": record.messages_before,
            "messages_after": record.messages_after,
            "pack_ms": record.pack_ms,
            "cost_sent_usd": as_float(record.cost_sent_usd),
            "cost_full_usd": as_float(record.cost_full_usd),
            "recall_tokens": record.recall_tokens,
            "recall_message_count": record.recall_message_count,
        },
        "entries": entries,
        # Old messages quoted on this turn: sent as quotes, so never among `dropped_ranges`.
        "recalled_ids": recalled_ids,
        # The chat format adds a fixed reply priming to the per-message counts.
        "entry_tokens": entry_tokens,
        # How these entries were joined into a request every chat template accepts (optimizer.shape);
        # `record.tokens_sent` counts that request.
        "request_shape": list((record.stats or {}).get("request_shape") or []),
        "dropped_ranges": record.dropped_ranges or [],
        # Users' numbering of every message and summary above, by id (selectors.message_numbers).
        "numbers": {str(k): v for k, v in numbers.items()},
        "summary_numbers": {str(k): v for k, v in ordinals.items()},
        "summary": None if summary is None else {
            "id": summary["id"],
            "covers_from_id": summary["covers_from_id"],
            "covers_through_id": summary["covers_through_id"],
            "covered_message_count": summary["covered_message_count"],
        },
    }
