"""Our own export (`conversation_export`, `{"format": "longchat.conversation", "version": 1, ...}`):
everything the app stores about a message comes back, so export → import gives the same chat.

Token and character counts are not read: they are computed again as the app computes them for the
model the imported chat uses. A reply exported while it was still streaming is imported stopped:
nothing here will ever finish it. The ids are the exporting server's: every reference (a reply's
question, a summary's covered range, an edited summary's original, the window start) is mapped to
the new rows by the service.
"""

from __future__ import annotations

from typing import Any

from .records import (
    KINDS,
    LINK_FIELDS,
    MODEL_MAX_CHARS,
    STATUSES,
    ConversationError,
    ConversationRecord,
    MessageRecord,
    conversation_parsed,
    cost_of,
    count_of,
    describe,
    flag_of,
    iso_time,
    link_column,
    object_of,
    role_of,
    source_id_of,
    text_of,
)

FORMAT = "longchat.conversation"
VERSION = 1
_COUNTS = ("prompt_tokens", "completion_tokens", "latency_ms", "covered_message_count", "source_chars")
_FLAGS = ("extractive", "discarded", "edited")
# Links to a message that must come before the one holding them, as the app writes them.
_EARLIER_LINKS = {"parent": "parent", "edited_from": "original summary"}


def is_document(value: Any) -> bool:
    return isinstance(value, dict) and value.get("format") == FORMAT


def version_problem(value: dict[str, Any]) -> str | None:
    """Why this server cannot read the document's version (None when it can)."""
    version = value.get("version")
    if version == VERSION:
        return None
    return f"It is a Longchat export of version {version!r}; this server reads version {VERSION}."


def conversation_parse(document: Any, *, index: int) -> ConversationRecord:
    head = document.get("conversation") if isinstance(document, dict) else None
    title = head.get("title") if isinstance(head, dict) else None
    return conversation_parsed(document, _parse, index=index, title=title)


def _parse(document: Any) -> ConversationRecord:
    if not is_document(document):
        raise ConversationError(f'is not a Longchat export (found {describe(document)}, without "format")')
    problem = version_problem(document)
    if problem is not None:
        raise ConversationError(problem)
    head = object_of(document.get("conversation"), what='"conversation"')
    rows = document.get("messages")
    if not isinstance(rows, list):
        raise ConversationError(f'"messages" is {describe(rows)}, not a list')
    messages = [_message(row, number=n) for n, row in enumerate(rows, 1)]
    refs = {m.ref for m in messages}
    if len(refs) != len(messages):
        raise ConversationError("two messages have the same id")
    for n, message in enumerate(messages, 1):
        for name in ("covers_from", "covers_through"):
            target = message.links.get(name)
            if target is not None and target not in refs:
                raise ConversationError(f"message {n} (a summary) covers message id {target}, which is not in the file")
        # A reply whose question is gone keeps no link, as the database would have it (SET_NULL).
        for name in ("reply_to", "edited_from", "parent", "off_path_by"):
            if message.links.get(name) not in refs:
                message.links.pop(name, None)
    _earlier_links_check(messages=messages)
    config = head.get("llm_config")
    window = _ref(head.get("window_start_id"), what="the window start")
    return ConversationRecord(
        source_id=source_id_of(head.get("id")),
        title=text_of(head.get("title"), what="the title", allow_null=True),
        title_is_custom=flag_of(head.get("title_is_custom", True), what="title_is_custom"),
        system_prompt=text_of(head.get("system_prompt", ""), what="the system prompt", allow_null=True),
        created_at=iso_time(head.get("created_at"), what="the conversation's created_at"),
        updated_at=iso_time(head.get("updated_at"), what="the conversation's updated_at"),
        offline=flag_of(head.get("offline", False), what="offline"),
        pinned_at=iso_time(head.get("pinned_at"), what="the conversation's pinned_at"),
        archived_at=iso_time(head.get("archived_at"), what="the conversation's archived_at"),
        llm_config=(
            {"name": config["name"], "model": config["model"]}
            if isinstance(config, dict) and isinstance(config.get("name"), str) and isinstance(config.get("model"), str)
            else None
        ),
        window_start_ref=window if window in refs else "",
        # Exports made before folders were exported have none: the chat comes in unfiled.
        folder=text_of(head.get("folder"), what="the folder", allow_null=True),
        messages=messages,
    )


def _earlier_links_check(*, messages: list[MessageRecord]) -> None:
    """The app writes a child after its parent and a summary's edit after the summary it replaces (a
    path read in id order runs from its root; the share page walks a message's parents, discarding
    walks a summary's edits): one later in the file, or the message itself, would make a loop no
    such walk ends."""
    earlier: set[str] = set()
    for n, message in enumerate(messages, 1):
        for name, what in _EARLIER_LINKS.items():
            target = message.links.get(name)
            if target is not None and target not in earlier:
                raise ConversationError(
                    f"message {n}'s {what} (id {target}) is not a message before it in the file: a message "
                    f"comes after its {what}"
                )
        earlier.add(message.ref)


def _ref(value: Any, *, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConversationError(f"{what} is not a message id (found {describe(value)})")
    return str(value)


def _role_kind_status(row: dict[str, Any], *, what: str) -> tuple[str, str, str]:
    role = role_of(row.get("role"), what=what)
    kind = row.get("kind", "chat")
    if kind not in KINDS:
        raise ConversationError(f"{what} has kind {kind!r}: expected chat or summary")
    if kind == "summary" and role != "system":
        raise ConversationError(f"{what} is a summary with role {role!r}: summaries are system messages")
    status = row.get("status", "complete")
    if status not in STATUSES:
        raise ConversationError(f"{what} has status {status!r}: expected one of {', '.join(STATUSES)}")
    return role, kind, status


def _message(row: Any, *, number: int) -> MessageRecord:
    what = f"message {number}"
    row = object_of(row, what=what)
    ref = _ref(row.get("id"), what=f"{what}'s id")
    if not ref:
        raise ConversationError(f"{what} has no id")
    role, kind, status = _role_kind_status(row, what=what)
    model = text_of(row.get("model"), what=f"{what}'s model", allow_null=True)
    if len(model) > MODEL_MAX_CHARS:
        raise ConversationError(f"{what}'s model name is longer than {MODEL_MAX_CHARS} characters")
    extra: dict[str, Any] = {
        "model": model,
        "error": text_of(row.get("error"), what=f"{what}'s error", allow_null=True),
        "reasoning": text_of(row.get("reasoning"), what=f"{what}'s reasoning", allow_null=True),
        # Exports made before it was stored have none; anything longer than a reason is no reason; and
        # only a model's reply has one (the chat would mark another message "cut at the output limit").
        "finish_reason": text_of(row.get("finish_reason"), what=f"{what}'s finish_reason", allow_null=True)[:32]
        if role == "assistant" else "",
        "cost_usd": cost_of(row.get("cost_usd"), what=f"{what}'s cost_usd"),
        # A user message's images, as exported (checked when stored: import_writing); others have none.
        "images": row.get("images") if role == "user" else None,
    }
    for name in _COUNTS:
        extra[name] = count_of(row.get(name), what=f"{what}'s {name}")
    for name in _FLAGS:
        extra[name] = flag_of(row.get(name, False), what=f"{what}'s {name}")
    links = {}
    for name in LINK_FIELDS:
        target = _ref(row.get(link_column(name)), what=f"{what}'s {link_column(name)}")
        if target:
            links[name] = target
    skipped_pins = row.get("skipped_pin_ids")
    if skipped_pins is not None:
        if not isinstance(skipped_pins, list):
            raise ConversationError(f"{what}'s skipped_pin_ids is {describe(skipped_pins)}, not a list of ids")
        skipped_pins = [_ref(pk, what=f"{what}'s skipped_pin_ids") for pk in skipped_pins]
    return MessageRecord(
        role=role,
        kind=kind,
        # Nothing here will finish a reply that was still streaming when it was exported.
        status="stopped" if status == "streaming" else status,
        content=text_of(row.get("content"), what=f"{what}'s content"),
        created_at=iso_time(row.get("created_at"), what=f"{what}'s created_at"),
        updated_at=iso_time(row.get("updated_at"), what=f"{what}'s updated_at"),
        pinned=flag_of(row.get("pinned", False), what=f"{what}'s pinned"),
        superseded=flag_of(row.get("superseded", False), what=f"{what}'s superseded"),
        ref=ref,
        links=links,
        extra=extra,
        skipped_pins=skipped_pins if kind == "summary" else None,
    )
