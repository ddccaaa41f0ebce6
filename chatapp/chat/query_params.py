"""Values read from a page's query string, where a value that is not one is ignored, not refused."""

from __future__ import annotations

# Below 2**63: what a bigint id column and every database driver take.
MAX_ID_DIGITS = 18


def query_id(raw: str) -> int | None:
    """A row id given in the query string (`?after=`, `?current=`), or None when `raw` is not one:
    empty, not ASCII digits ("²" passes `isdigit`, which `int` refuses), or longer than any id (`int`
    refuses 4,300 digits and more, and the database a number past its column)."""
    return int(raw) if raw.isascii() and raw.isdecimal() and len(raw) <= MAX_ID_DIGITS else None
