"""The optimization record of a turn, written when its context is packed (what was sent, dropped,
recalled, why, at what cost; finished when the turn ends: record_finish); and the `context` event
the chat's gauge reads."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import optimizer
from chatapp.chat.context import ContextInput
from chatapp.chat.gauge import packed_gauge
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.chat.prompts import PROMPT_IDS
from chatapp.chat.rowsql import row_create
from chatapp.dashboard.costs import money
from chatapp.dashboard.totals import PreviousRequest, dashboard_totals_record_add
from chatapp.providers import llm
from optimizer.types import PackedMessage, PackResult, PackStats


def _int_ids(values: Iterable[object]) -> list[int | str]:
    """Ids as the records store them: a message's as its number, a prompt's ("instructions") as is."""
    return [int(v) if v.isdigit() else v for v in map(str, values)]


@dataclass(frozen=True, slots=True)
class DroppedRanges:
    """What a turn left out, and how its tokens are summed when the turn ends (record_finish).

    `ranges` is what the record stores: the quoted messages cut out. Its tokens are the live tokens
    of `sum_ranges` less `less`: the ranges before the quotes were cut out (the same from one turn
    to the next until the window moves, so their sum is cached) less the quoted messages' stored
    counts, which recall read; or `ranges` itself with nothing less when a count was not read. For a
    model that does not see images, `less` also takes off the images' cost (less their placeholders')
    of the messages in `ranges`: what they would have been sent as.
    """

    ranges: list[list[int]]
    sum_ranges: list[list[int]]
    less: int


def record_dropped_ranges(*, ctx: ContextInput, result: PackResult) -> DroppedRanges:
    """Live message ids neither sent nor covered by the summary used, as inclusive [first, last] ranges.

    Loaded messages are judged one by one; the history below the loaded window (never read, by
    design) is described by id bounds between the static messages that were read.
    """
    sent: set[int] = set()
    recalled: set[int] = set()
    covered_through: int | None = None
    for packed in result.messages:
        if packed.origin == "summary" and ctx.summary is not None:
            covered_through = int(ctx.summary.through_id)
            continue
        ids = {int(i) for i in packed.source_ids if str(i).isdigit()}
        sent.update(ids)
        if packed.origin == "recall":
            recalled.update(ids)
    floor = covered_through + 1 if covered_through is not None else None

    def uncovered(pk: int) -> bool:
        return floor is None or pk >= floor

    ranges: list[list[int]] = [[pk, pk] for pk in ctx.loaded_ids if pk not in sent and uncovered(pk)]
    if ctx.window_start is not None and ctx.loaded_ids:
        window_start = int(ctx.window_start)
        bounds = sorted(pk for pk in ctx.static_ids if pk < window_start)
        lowest = min(ctx.loaded_ids)
        # Below the lowest message read there may be history too: a greeting before the first user message.
        head = ctx.first_live_id if ctx.first_live_id is not None and ctx.first_live_id < lowest else lowest + 1
        low = max(head, floor or 0)
        for pk in [*bounds, window_start]:
            if low <= pk - 1:
                ranges.append([low, pk - 1])
            low = max(low, pk + 1)
    ranges.sort()
    kept = sorted(pk for pk in ctx.loaded_ids if pk in sent or not uncovered(pk))
    merged: list[list[int]] = []
    for first, last in ranges:
        if merged and not any(merged[-1][1] < k < first for k in kept):
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    # Quoted messages usually lie in the history below the window, described above by id bounds
    # only: cut them out, since a recall block sent them (as quotes) for this request.
    ranges = _ranges_without(merged, recalled)
    # A model that does not see images would have been sent their placeholders: the dropped messages
    # count so, as the full history does, not with the images' cost their stored counts hold.
    images = sum(n for pk, n in ctx.images_overcount.items()
                 if pk.isdigit() and any(a <= int(pk) <= b for a, b in ranges))
    inside = [pk for pk in recalled if any(first <= pk <= last for first, last in merged)]
    if not inside or any(pk not in ctx.recall_token_counts for pk in inside):
        return DroppedRanges(ranges=ranges, sum_ranges=ranges, less=images)
    # Quoted messages are recallable, so live chat messages: each one is in the sum of `merged`.
    return DroppedRanges(ranges=ranges, sum_ranges=merged,
                         less=images + sum(ctx.recall_token_counts[pk] for pk in inside))


def _ranges_without(ranges: list[list[int]], ids: set[int]) -> list[list[int]]:
    """Inclusive [first, last] `ranges` with `ids` cut out, splitting a range around each one inside it."""
    if not ids:
        return ranges
    out: list[list[int]] = []
    for first, last in ranges:
        low = first
        for pk in sorted(i for i in ids if first <= i <= last):
            if low <= pk - 1:
                out.append([low, pk - 1])
            low = pk + 1
        if low <= last:
            out.append([low, last])
    return out


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda o: list(o) if isinstance(o, (set, frozenset)) else str(o)))


# Query terms the chat is told about (the record keeps them all).
RECALL_TERMS_SHOWN = 8


def _recall_summary(*, info: PackStats) -> dict[str, Any] | None:
    """This turn's recall block as the chat shows it (gauge popover, timeline marks); None without one.

    `ids` are the quoted messages in time order, `hits` how many of them matched the newest message
    (the others are their neighbours), `terms` the strongest query terms (stemmed, as searched).
    """
    ids = _int_ids(info.recall_ids)
    if not ids:
        return None
    return {
        "messages": len(ids),
        "hits": len(info.recall_hit_ids),
        "tokens": info.recall_tokens,
        "terms": list(info.recall_terms[:RECALL_TERMS_SHOWN]),
        "ids": ids,
    }


def _recall_words(*, messages: int, tokens: int) -> str:
    """The recall sentence, e.g. "recalled 4 earlier messages (312 tokens)" (the chat's words too)."""
    return f"recalled {messages:,} earlier message{'s' if messages != 1 else ''} ({tokens:,} tokens)"


def context_event(*, result: PackResult, budget: int, ctx: ContextInput) -> dict[str, Any]:
    """The start event's `context`: the gauge (one shape everywhere, gauge.packed_gauge) of this
    request, plus the decision behind it."""
    info = result.info
    return {
        **packed_gauge(result=result, ctx=ctx, budget=budget),
        "reason": info.strategy_reason,
        "triggered": info.triggered,
        # This request only: the next one recalls afresh for its own newest message.
        "recall": _recall_summary(info=info),
    }


def turn_context_note(*, result: PackResult, budget: int) -> str:
    info = result.info
    sent, full = info.tokens_after, info.tokens_before
    recall = _recall_summary(info=info)
    recalled = ""
    if recall is not None:
        words = _recall_words(messages=recall["messages"], tokens=recall["tokens"])
        recalled = f" It {words}, quoted before the newest message because they bear on it."
    if not info.optimization_applied or not info.messages_removed:
        return f"everything was sent — {sent:,} of {budget:,} tokens.{recalled}"
    removed = info.messages_removed
    how = "a summary stands in for the older part" if info.summary_used else "older messages were left out"
    note = (
        f"{info.strategy_chosen} — {how} ({removed:,} message{'s' if removed != 1 else ''} "
        f"not sent verbatim); {sent:,} of {budget:,} tokens sent, against {full:,} for the full history."
    )
    note += recalled
    if result.summary_span is not None:
        note += " A summary of the left-out part is being written in the background."
    return note


def _record_stats(*, info: PackStats, ctx: ContextInput, messages: Sequence[PackedMessage]) -> dict[str, Any]:
    """The record's `stats`: the pack's statistics plus what the request path measured around it.

    `system_prompt_tokens` (the custom instructions and system prompt as packed) and
    `system_prompt_hash` ("" without either) are written here; `system_prompt_changed` is added when
    the turn ends (record_finish), so comparing with the previous record costs no query before the
    first byte.
    """
    stats = info.as_dict()
    stats["pack_ms"] = ctx.pack_ms
    stats["system_prompt_tokens"] = sum(m.tokens for m in messages if not PROMPT_IDS.keys().isdisjoint(m.source_ids))
    stats["system_prompt_hash"] = ctx.prompt_hash
    if ctx.request is not None and ctx.request.notes:
        stats["request_shape"] = list(ctx.request.notes)  # how the request was made template-safe
    if ctx.quota_exhausted:
        stats["summary_quota_exhausted"] = True
    return stats


_OWN_TEXT = frozenset({"verbatim", "pinned"})  # entries whose stored message is what was sent


def _sent_entry(
    *,
    packed: PackedMessage,
    summary_message_id: int | None,
    info: PackStats | None = None,
    quoted: Mapping[int, str] | None = None,
    wire: PackedMessage | None = None,
) -> dict[str, Any]:
    """One entry of a record's `sent` list: enough, with the stored messages, to rebuild exactly
    what was sent in its place.

    A user's message with images (`wire`: it as sent, context_images) adds `images`, how many went
    with it to a model that sees them, or keeps `content`, the text sent with their placeholders to
    one that does not (and `tokens`, as counted so), which no row stores either.

    - verbatim / pinned: `source_ids` = [the message's id]; its stored content was sent.
    - summary: `source_ids` = [the summary message's id], also given as `summary_id` (the optimizer
      reports the last covered id there, whose text is not what was sent). Summary messages are
      never edited in place (an edit is a new message), so its stored content is what was sent.
    - compressed: `source_ids` = [the message's id] and `content` = the head + tail text actually
      sent, which no row stores (compression is rare, so this costs little).
    - a prompt (the custom instructions or the chat's system prompt, prompts.PROMPT_IDS): `source_ids`
      = ["instructions"] or ["system-prompt"], `system_prompt` = "instructions" or "conversation",
      and `content` = the text sent, which no message row holds (and which may change afterwards).
    - recall: `source_ids` = the quoted messages in time order; `hit_ids` = those the search
      matched, best first (the others are their neighbours); `terms` = the query terms, strongest
      first (why they were recalled); and `layout` (see _recall_layout), or `content` = the block's
      text when a quote could not be located in it. `quoted` maps the quoted ids to their stored
      contents, `info` is the pack's statistics (the hits and terms are reported there).
    """
    if wire is not None and wire is not packed:
        with_images = _sent_entry(packed=packed, summary_message_id=summary_message_id, info=info, quoted=quoted)
        if isinstance(wire.content, str):
            with_images.update(content=wire.content, tokens=wire.tokens)
        else:
            with_images["images"] = sum(1 for part in wire.content if part.get("type") == "image_url")
        return with_images
    ids = packed.source_ids
    if len(ids) == 1 and packed.origin in _OWN_TEXT and str(ids[0]).isdigit():
        # Most entries (one per message of the window, on every turn): a stored message sent as it is.
        return {"source_ids": [int(ids[0])], "origin": packed.origin, "tokens": packed.tokens, "role": packed.role}
    entry: dict[str, Any] = {
        "source_ids": _int_ids(packed.source_ids),
        "origin": packed.origin,
        "tokens": packed.tokens,
        "role": packed.role,
    }
    prompt = PROMPT_IDS.get(str(packed.source_ids[0])) if packed.source_ids else None
    if prompt is not None:
        entry["system_prompt"] = prompt
        entry["content"] = packed.content
    elif packed.origin == "summary" and summary_message_id is not None:
        entry["source_ids"] = [summary_message_id]
        entry["summary_id"] = summary_message_id
    elif packed.origin == "compressed":
        entry["content"] = packed.content
    elif packed.origin == "recall":
        entry["hit_ids"] = _int_ids(info.recall_hit_ids) if info is not None else []
        entry["terms"] = list(info.recall_terms) if info is not None else []
        # a recall block is one text (the core writes it), never content parts
        layout = _recall_layout(content=cast(str, packed.content), source_ids=entry["source_ids"], quoted=quoted or {})
        if layout is None:
            entry["content"] = packed.content
        else:
            entry["layout"] = layout
    return entry


def _recall_layout(
    *, content: str, source_ids: Sequence[int | str], quoted: Mapping[int, str]
) -> list[str | int] | None:
    """A recall block's text as the pieces around its quotes, with each quote's message id in its place.

    Joining the pieces, each id replaced by that message's stored content, gives `content` exactly
    (checked here before it is trusted). The block quotes whole messages verbatim, each after
    "speaker: " and up to the end of a line, so beyond its header and date lines it repeats stored
    text: keeping only the glue keeps a record small where the block can run to thousands of tokens
    on every turn. Chat messages are never edited in place, so the rebuild stays exact. None when a
    quote is not found where expected (the caller then stores the text itself).
    """
    layout: list[str | int] = []
    cursor = 0
    for sid in source_ids:
        text = quoted.get(sid) if isinstance(sid, int) else None
        if text is None:
            return None
        needle = ": " + text
        at = content.find(needle, cursor)
        # The quote runs to the end of its line: a shorter text can also occur inside another line.
        while at >= 0 and not _line_ends(content, at + len(needle)):
            at = content.find(needle, at + 1)
        if at < 0:
            return None
        layout.append(content[cursor : at + 2])
        layout.append(sid)
        cursor = at + len(needle)
    layout.append(content[cursor:])
    rebuilt = "".join(part if isinstance(part, str) else quoted[part] for part in layout)
    return layout if rebuilt == content else None


def _line_ends(text: str, at: int) -> bool:
    return at == len(text) or text[at] == "\n"


def _recall_quotes(
    *, conversation: Conversation, packed: PackedMessage | None, read: dict[int, str]
) -> dict[int, str]:
    """The stored contents of the messages a recall block quotes: what _recall_layout checks the
    block against. Taken from what recall read for the block (`read`); a primary-key read only for
    a block that quotes something recall did not read (none on the request path)."""
    if packed is None:
        return {}
    ids = [int(i) for i in packed.source_ids if str(i).isdigit()]
    if all(pk in read for pk in ids):
        return {pk: read[pk] for pk in ids}
    return dict(Message.objects.filter(conversation=conversation, pk__in=ids).values_list("id", "content"))


# How long a sum of dropped tokens is reused: far longer than a conversation's turns are apart.
@dataclass(frozen=True, slots=True)
class CreatedRecord:
    record: OptimizationRecord
    facts: dict[str, Any]  # as the dashboard's totals counted it (record_finish corrects from these)
    previous: PreviousRequest | None


def record_create(
    *,
    conversation: Conversation,
    reply: Message,
    preference: str,
    target: llm.LLMTarget,
    budget: int,
    result: PackResult,
    ctx: ContextInput,
    window_start_id: int | None,
    dropped: list[list[int]],
) -> CreatedRecord:
    """The turn's optimization record: what was sent (each entry with its source), dropped, recalled,
    why, and what it cost; the provider's figures are added when the turn ends (record_finish)."""
    info = result.info
    decision = result.decision
    scores = info.scores or (decision.as_dict() if decision is not None else {})
    recall_packed = next((m for m in result.messages if m.origin == "recall"), None)
    quoted = _recall_quotes(conversation=conversation, packed=recall_packed, read=ctx.recall_contents)
    summary_used = any(m.origin == "summary" for m in result.messages)
    tokens_sent, tokens_full = info.tokens_after, info.tokens_before
    provider = optimizer.provider_for_base_url(target.base_url)
    record = row_create(
        OptimizationRecord,
        conversation=conversation,
        reply=reply,
        preference=preference,
        model=target.model,
        registry_provider=provider,
        context_window=target.context_window,
        budget=budget,
        triggered=info.triggered,
        window_start_id=window_start_id,
        strategy=info.strategy_chosen,
        reason=info.strategy_reason,
        scores=_json_safe(scores),
        tokens_full=tokens_full,
        tokens_sent=tokens_sent,
        estimated=info.estimated or ctx.counts_mixed,
        sent=[
            _sent_entry(packed=m, summary_message_id=ctx.summary_message_id, info=info, quoted=quoted, wire=w)
            for m, w in zip(result.messages, ctx.attached or result.messages, strict=True)
        ],
        dropped_ranges=dropped,
        recall_tokens=recall_packed.tokens if recall_packed is not None else 0,
        recall_message_count=len(recall_packed.source_ids) if recall_packed is not None else 0,
        summary_id=ctx.summary_message_id if summary_used else None,
        messages_before=info.messages_before,
        messages_after=info.messages_after,
        pack_ms=ctx.pack_ms,
        cost_sent_usd=money(optimizer.cost_usd(target.model, prompt_tokens=tokens_sent, provider=provider)),
        cost_full_usd=money(optimizer.cost_usd(target.model, prompt_tokens=tokens_full, provider=provider)),
        stats=_json_safe(_record_stats(info=info, ctx=ctx, messages=result.messages)),
    )
    facts, previous = dashboard_totals_record_add(record=record)  # counted in the turn's transaction
    return CreatedRecord(record=record, facts=facts, previous=previous)
