"""Conversation imports: an uploaded file → neutral conversation records (`records`), one at a time.

Pure Python (no Django, no database): the service (`chatapp.chat.import_services`) stores what this
package reads. One module per format — `longchat` (our own export), `chatgpt` (conversations.json),
`openwebui` — and `reader`, which parses the file one top-level item at a time.

`document_open` checks what can be checked before anything is stored: the bytes are JSON text (or a
ZIP holding it), the format is one of the three (told by the first item), and the whole file parses
(`ImportDocument.count`, a full pass: a truncated file is refused whole, not after importing its
first half). A conversation that then fails its format's checks is reported on its own
(`ConversationError`) and the others go on.

Memory: the file's bytes plus one conversation's parsed objects (see `reader`), whatever the number
of conversations in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from . import chatgpt, longchat, openwebui
from .reader import JsonItems, json_bytes
from .records import ConversationError, ConversationRecord, ImportFileError, MessageRecord, describe

__all__ = [
    "FORMATS",
    "ConversationError",
    "ConversationRecord",
    "ImportDocument",
    "ImportFileError",
    "MessageRecord",
    "document_open",
]

# format name -> (label for people, parser of one item)
FORMATS: dict[str, tuple[str, Callable[..., ConversationRecord]]] = {
    "longchat": ("Longchat export", longchat.conversation_parse),
    "chatgpt": ("ChatGPT conversations.json", chatgpt.conversation_parse),
    "openwebui": ("Open WebUI export", openwebui.conversation_parse),
}

_EXPECTED = (
    'expected a Longchat export ({"format": "longchat.conversation", ...}), ChatGPT\'s conversations.json '
    '(a list of conversations with "mapping") or an Open WebUI export (a list of chats with "chat")'
)


@dataclass(frozen=True)
class ImportDocument:
    format: str
    data: bytes  # the JSON text's bytes

    @property
    def label(self) -> str:
        return FORMATS[self.format][0]

    def count(self) -> int:
        """How many conversations the file holds; a full parse, so a broken file fails here."""
        return sum(1 for _ in JsonItems(self.data))

    def conversations(self, *, start: int = 0) -> Iterator[tuple[int, ConversationRecord | ConversationError]]:
        """(index, record) for each conversation from `start` on, or (index, the reason it cannot
        be imported). Indexes count from 0 in file order."""
        parse = FORMATS[self.format][1]
        for index, item in enumerate(JsonItems(self.data)):
            if index < start:
                continue
            try:
                yield index, parse(item, index=index)
            except ConversationError as exc:
                yield index, exc


def document_open(data: bytes, *, max_bytes: int) -> ImportDocument:
    """The upload as an importable document, or ImportFileError saying in words what is wrong."""
    text = json_bytes(data, max_bytes=max_bytes)
    items = JsonItems(text)
    first = next(iter(items), None)
    if first is None:
        raise ImportFileError("The file holds an empty list: there are no conversations to import.")
    return ImportDocument(format=_detect(first, top_level=items.top_level), data=text)


def _detect(first: Any, *, top_level: str) -> str:
    if longchat.is_document(first):
        problem = longchat.version_problem(first)
        if problem is not None:
            raise ImportFileError(problem)
        return "longchat"
    if chatgpt.is_conversation(first):
        return "chatgpt"
    if openwebui.is_chat(first):
        return "openwebui"
    found = (
        f"found a top-level {describe(first).removeprefix('an ')}"
        if top_level == "object"
        else f"found a list whose first item is {describe(first)}"
    )
    raise ImportFileError(f"The file is JSON but not a known export: {_EXPECTED}; {found}.")
