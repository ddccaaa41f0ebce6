"""Flash messages (django.contrib.messages) whose storage is built only when a request uses it.

MessageMiddleware builds the storage on every request. Django's default (FallbackStorage) builds a
cookie storage and a session storage for it, the cookie one with its signer: 1 % of a chat turn's
CPU, on API calls and streams that never show a flash message. Only the settings and share pages
add them and only pages show them. Until something reads, adds or sets the level, nothing is built,
and the response is left as FallbackStorage leaves it when nothing was read or added.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.contrib.messages.storage.fallback import FallbackStorage
from django.http import HttpRequest, HttpResponse


class LazyFallbackStorage:
    """settings.MESSAGE_STORAGE: FallbackStorage, made on first use."""

    def __init__(self, request: HttpRequest, *args: Any, **kwargs: Any) -> None:
        self._made: FallbackStorage | None = None
        self._make = lambda: FallbackStorage(request, *args, **kwargs)

    @property
    def storage(self) -> FallbackStorage:
        if self._made is None:
            self._made = self._make()
        return self._made

    def update(self, response: HttpResponse) -> Any:
        # An unused storage has nothing queued and nothing read: FallbackStorage.update stores nothing.
        return None if self._made is None else self._made.update(response)

    def __getattr__(self, name: str) -> Any:  # add, used, added_new, level and the rest
        return getattr(self.storage, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("_made", "_make"):
            object.__setattr__(self, name, value)
        else:  # messages.set_level() sets `level` on the storage
            setattr(self.storage, name, value)

    def __len__(self) -> int:
        return len(self.storage)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.storage)

    def __contains__(self, item: object) -> bool:
        return item in self.storage

    def __repr__(self) -> str:
        return repr(self.storage) if self._made is not None else f"<{type(self).__name__}: not used>"
