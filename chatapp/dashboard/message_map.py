"""The message map: every message's status in the latest request, run-length encoded, so a page never
carries one row per message.
"""

from __future__ import annotations

import contextlib
from itertools import groupby
from typing import Any

from django.db import connection
from django.db.models import Case, IntegerField, Q, Value, When

from chatapp.chat.context import offline_reply_q
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.providers.llm import OFFLINE_MODEL

# Message map statuses, in legend order; the map sends the index, not the name.
MAP_STATUSES: tuple[str, ...] = (
    "verbatim",  # sent as is
    "pinned",  # sent with origin "pinned" (an unpinned static message, e.g. the first user one, is "verbatim")
    "compressed",  # sent as head + tail
    "recalled",  # outside the window, quoted by the recall block for the newest message
    "summarized",  # not sent, covered by the summary that was sent
    "dropped",  # not sent and not covered
    "summary",  # a summary message itself
    "excluded",  # never sendable: a regenerated-away or failed reply, a discarded summary (but the one
    # the latest request sent, discarded or edited since: "summary"), or
    # (the latest request going to a real model) the offline demo's replies
    "new",  # written after the latest request (its reply, or later)
    "unsent",  # older than the window and not accounted for by the record (old records)
)


MAP_STATUS_LABELS: dict[str, str] = {
    "verbatim": "Sent verbatim",
    "pinned": "Pinned / kept",
    "compressed": "Sent compressed",
    "recalled": "Recalled (quoted for the newest message)",
    "summarized": "Summarized",
    "dropped": "Dropped",
    "summary": "Summary message",
    "excluded": "Never sent (regenerated, failed, or the offline demo's reply to a real model)",
    "new": "After the latest request",
    "unsent": "Not sent",
}


_STATUS_INDEX = {name: i for i, name in enumerate(MAP_STATUSES)}


# One character per message in `roles`: its code is computed by the database beside the status.
_ROLE_CHARS = "uasS"  # user, assistant, system, summary (a summary is not numbered: see message_numbers)
_ROLE_CODE = Case(
    When(kind=Message.Kind.SUMMARY, then=Value(3)),
    When(role=Message.Role.USER, then=Value(0)),
    When(role=Message.Role.ASSISTANT, then=Value(1)),
    default=Value(2),
    output_field=IntegerField(),
)


def _map_status_expression(*, origin_ids: dict[str, list[int]], horizon: int | None,
                           covered: tuple[int, int] | None, dropped: list[tuple[int, int]],
                           real_model: bool = False, summary_id: int | None = None) -> Case:
    """Each message's status index, computed by the database (first matching rule wins). `summary_id`:
    the summary the latest request sent, a summary of that request whatever became of it since."""
    code = _STATUS_INDEX
    whens = [
        *([When(id=summary_id, then=Value(code["summary"]))] if summary_id is not None else []),
        When(kind=Message.Kind.SUMMARY, discarded=True, then=Value(code["excluded"])),
        When(kind=Message.Kind.SUMMARY, then=Value(code["summary"])),
    ]
    for origin, status in (("pinned", "pinned"), ("compressed", "compressed"), ("verbatim", "verbatim"),
                           ("recall", "recalled")):
        if origin_ids.get(origin):
            whens.append(When(id__in=origin_ids[origin], then=Value(code[status])))
    never = Q(superseded=True) | Q(status=Message.Status.ERROR)
    if real_model:
        # A real model is never sent them (context_load). Asked only of a chat that has some: the model
        # column is not in msg_conv_id_idx, and reading it costs every other map its index-only scan.
        never |= offline_reply_q()
    whens.append(When(never, then=Value(code["excluded"])))
    if horizon is None:
        return Case(*whens, default=Value(code["new"]), output_field=IntegerField())
    whens.append(When(id__gt=horizon, then=Value(code["new"])))
    if covered is not None:
        whens.append(When(id__gte=covered[0], id__lte=covered[1], then=Value(code["summarized"])))
    if dropped:
        in_dropped = Q()
        for lo, hi in dropped:
            in_dropped |= Q(id__gte=lo, id__lte=hi)
        whens.append(When(in_dropped, then=Value(code["dropped"])))
    return Case(*whens, default=Value(code["unsent"]), output_field=IntegerField())


def _origin_ids(sent: list[dict[str, Any]]) -> dict[str, list[int]]:
    """The ids a record's sent entries quote, by how they were sent (summaries apart)."""
    # Recalled messages have their own status, ahead of "summarized" and "dropped": a quote was sent.
    origin_ids: dict[str, list[int]] = {"verbatim": [], "pinned": [], "compressed": [], "recall": []}
    for entry in sent:
        origin = entry.get("origin", "verbatim")
        if origin == "summary":
            continue
        bucket = origin_ids.get(origin, origin_ids["verbatim"])
        for sid in entry.get("source_ids", []):
            with contextlib.suppress(TypeError, ValueError):
                bucket.append(int(sid))
    return origin_ids


def _dropped_pairs(ranges: list[Any]) -> list[tuple[int, int]]:
    dropped = []
    for pair in ranges:
        with contextlib.suppress(TypeError, ValueError, IndexError):
            dropped.append((int(pair[0]), int(pair[1])))
    return dropped


def dashboard_message_map(*, conversation: Conversation) -> dict[str, Any]:
    """Every message of the active path with its status in that path's latest request, run-length encoded.

    `id_runs` = [[first_id, length], ...] over consecutive ids; `roles` = one character per message
    (u/a/s); `status_runs` = [[status_index, length], ...]. Together they address every message in
    chronological order at a few bytes per run instead of a row per message. The database classifies
    the messages; Python only reads (id, role, status) tuples and counts runs.
    """
    # The active path's latest request (issue 13, branches): after a switch, the newest record may
    # belong to another branch.
    latest = (
        OptimizationRecord.objects.filter(conversation=conversation)
        .filter(Q(reply__isnull=True) | Q(reply__superseded=False))
        .order_by("-id")
        .only("id", "model", "sent", "dropped_ranges", "summary_id", "window_start_id")
        .first()
    )
    origin_ids = _origin_ids(latest.sent or [] if latest is not None else [])
    horizon = None
    dropped = _dropped_pairs(latest.dropped_ranges or [] if latest is not None else [])
    covered: tuple[int, int] | None = None
    if latest is not None:
        if latest.summary_id is not None:
            cover = (
                Message.objects.filter(pk=latest.summary_id)
                .values_list("covers_from_id", "covers_through_id")
                .first()
            )
            if cover and cover[0] is not None and cover[1] is not None:
                covered = (cover[0], cover[1])
        # The latest request saw everything up to its newest message; its reply and later come after.
        sent_ids = [i for ids in origin_ids.values() for i in ids]
        horizon = max([*sent_ids, *(hi for _, hi in dropped), latest.window_start_id or 0, *(covered or ())])

    status = _map_status_expression(origin_ids=origin_ids, horizon=horizon, covered=covered, dropped=dropped,
                                    summary_id=latest.summary_id if latest is not None else None,
                                    real_model=latest is not None and latest.model != OFFLINE_MODEL
                                    and conversation.offline_reply_count > 0)
    ids, codes = _map_rows(conversation=conversation, status=status)
    id_runs = _id_runs(ids)
    status_runs = [[code, sum(1 for _ in group)] for code, group in groupby(code >> 2 for code in codes)]
    counts = [0] * len(MAP_STATUSES)
    for code, length in status_runs:
        counts[code] += length
    return {
        "count": len(ids),
        "record_id": latest.pk if latest else None,
        "summary_id": latest.summary_id if latest else None,
        "statuses": list(MAP_STATUSES),
        "status_labels": [MAP_STATUS_LABELS[s] for s in MAP_STATUSES],
        "status_counts": dict(zip(MAP_STATUSES, counts, strict=True)),
        "id_runs": id_runs,
        # u/a/s per chat message, "S" per summary (summaries are not numbered: see message_numbers)
        "roles": bytes(code & 3 for code in codes).translate(_ROLE_TABLE).decode("ascii"),
        "status_runs": status_runs,
    }


_ROLE_TABLE = bytes(range(256)).translate(bytes.maketrans(bytes(range(4)), _ROLE_CHARS.encode("ascii")))


def _map_rows(*, conversation: Conversation, status: Case) -> tuple[list[int], list[int]]:
    """Every message's id and code (status index * 4 + role code), in order, as two lists.

    One row per message of the conversation (100,000 in a long one): the query is built by the ORM
    but its rows are fetched from the cursor, without the ORM's per-row work.
    """
    query = (
        Message.objects.filter(conversation=conversation, superseded=False)  # the active path's messages
        .order_by("id")
        .annotate(map_code=status * 4 + _ROLE_CODE)
        .values_list("id", "map_code")
    )
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [row[0] for row in rows], [row[1] for row in rows]


def _id_runs(ids: list[int]) -> list[list[int]]:
    """[[first id, length], ...] over runs of consecutive ids."""
    starts = [0, *(k for k in range(1, len(ids)) if ids[k] != ids[k - 1] + 1)]
    return [[ids[a], b - a] for a, b in zip(starts, [*starts[1:], len(ids)], strict=True)] if ids else []
