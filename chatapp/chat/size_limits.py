"""The ValidationError of an input over its size limit (a message, an import file), with the numbers
a response reports: the limit and the size found, in the limit's unit."""

from __future__ import annotations

from django.core.exceptions import ValidationError


class TooLarge(ValidationError):
    """An input larger than its limit; nothing was stored. `code` is "too_large"; a subclass says in
    `describe` what the limit is about and in which unit (the base's words name neither)."""

    def __init__(self, *, limit: int, size: int) -> None:
        self.limit = limit
        self.size = size
        super().__init__(self.describe(limit=limit, size=size), code="too_large")

    @staticmethod
    def describe(*, limit: int, size: int) -> str:
        """The message a person reads: what was too large, by how much."""
        return f"The input is {size:,} long; the limit is {limit:,}."
