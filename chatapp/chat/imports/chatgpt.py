"""ChatGPT's `conversations.json` (Settings → Data controls → Export): a list of conversations, each
a tree of messages in `mapping` ({node id: {message, parent, children}}) whose visible branch ends
at `current_node`.

This app has no branches yet: the active path is imported (from `current_node` up through `parent`,
reversed), and the messages only on other branches (an edited question's first version, a
regenerated answer's siblings) are counted in `omitted["branch_messages"]`, not stored. Also left
out and counted: tool messages (browsing results, code output: this app has no tool role), hidden
messages with text (ChatGPT's custom-instruction context), and user or assistant messages with no
text; empty system messages (every tree's root) are skipped silently. Text parts are joined; a part
that is not text (an image) becomes "[image]".
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .records import (
    ConversationError,
    ConversationRecord,
    MessageRecord,
    branch_path,
    describe,
    epoch_time,
    where,
)

MODEL_MAX_CHARS = 200


def is_conversation(value: Any) -> bool:
    return isinstance(value, dict) and "mapping" in value


def conversation_parse(conversation: Any, *, index: int) -> ConversationRecord:
    label = where(index, conversation.get("title") if isinstance(conversation, dict) else None)
    try:
        return _parse(conversation)
    except ConversationError as exc:
        raise ConversationError(f"{label}: {exc}") from None


def _parse(conversation: Any) -> ConversationRecord:
    if not is_conversation(conversation):
        raise ConversationError(f'is not a ChatGPT conversation (found {describe(conversation)}, without "mapping")')
    mapping = conversation["mapping"]
    if not isinstance(mapping, dict):
        raise ConversationError(f'its "mapping" is {describe(mapping)}, not an object of messages')
    path = _active_path(mapping, conversation.get("current_node"))
    on_path = {id(node) for node in path}
    omitted: Counter[str] = Counter()
    omitted["branch_messages"] = sum(
        1 for node in mapping.values()
        if isinstance(node, dict) and node.get("message") is not None and id(node) not in on_path
    )
    messages: list[MessageRecord] = []
    number = 0
    for node in path:
        message = node.get("message")
        if message is None:  # the tree's root
            continue
        number += 1
        record = _message(message, what=f"message {number}", omitted=omitted)
        if record is not None:
            messages.append(record)
    title = conversation.get("title")
    return ConversationRecord(
        title=title if isinstance(title, str) else "",
        created_at=epoch_time(conversation.get("create_time"), what="create_time"),
        updated_at=epoch_time(conversation.get("update_time"), what="update_time"),
        messages=messages,
        omitted={reason: n for reason, n in omitted.items() if n},
    )


def _active_path(mapping: dict[str, Any], current: Any) -> list[dict[str, Any]]:
    """The nodes from the root to `current` (else to the newest leaf), root first."""
    if not isinstance(current, str) or current not in mapping:
        current = _newest_leaf(mapping)
    path = branch_path(mapping, current, parent_key="parent")
    for node in path:
        if not isinstance(node, dict):
            raise ConversationError(f"a node of its mapping is {describe(node)}, not an object")
    return path


def _newest_leaf(mapping: dict[str, Any]) -> str | None:
    def created(node_id: str) -> float:
        message = mapping[node_id].get("message") or {}
        stamp = message.get("create_time") if isinstance(message, dict) else None
        return float(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else float("-inf")

    leaves = [
        node_id for node_id, node in mapping.items()
        if isinstance(node, dict) and not node.get("children") and node.get("message") is not None
    ]
    return max(leaves, key=created) if leaves else None


def _message(message: Any, *, what: str, omitted: Counter[str]) -> MessageRecord | None:
    if not isinstance(message, dict):
        raise ConversationError(f"{what} is {describe(message)}, not an object")
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if role is None:
        raise ConversationError(f"{what} has no role")
    if role not in ("system", "user", "assistant", "tool"):
        raise ConversationError(f"{what} has role {role!r}: expected system, user, assistant or tool")
    text = _content_text(message.get("content"), what=what)
    metadata = message.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    if not text.strip():
        if role in ("user", "assistant"):
            omitted["empty_messages"] += 1
        return None
    if role == "tool":
        omitted["tool_messages"] += 1
        return None
    if metadata.get("is_visually_hidden_from_conversation") is True:
        omitted["hidden_messages"] += 1
        return None
    model = metadata.get("model_slug") if role == "assistant" else None
    return MessageRecord(
        role=role,
        content=text,
        created_at=epoch_time(message.get("create_time"), what=f"{what}'s create_time"),
        updated_at=epoch_time(message.get("update_time"), what=f"{what}'s update_time"),
        extra={"model": model[:MODEL_MAX_CHARS]} if isinstance(model, str) else {},
    )


def _content_text(content: Any, *, what: str) -> str:
    if content is None:
        return ""
    if not isinstance(content, dict):
        raise ConversationError(f"{what}'s content is {describe(content)}, not an object")
    parts = content.get("parts")
    if isinstance(parts, list):
        return "\n".join(text for text in (_part_text(part) for part in parts) if text)
    text = content.get("text")
    if isinstance(text, str):
        # A code message is the model's code for a tool (ChatGPT shows it as a code block).
        return f"```\n{text}\n```" if content.get("content_type") == "code" and text.strip() else text
    return ""  # content types with no text to show (hidden reasoning, browsing state)


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        if isinstance(part.get("text"), str):  # an audio transcription
            return str(part["text"])
        kind = str(part.get("content_type") or "")
        if "image" in kind or "asset_pointer" in part:
            return "[image]"
        return f"[{kind or 'attachment'}]"
    return ""
