"""Open WebUI's export (Settings → Chats → Export): a list of chats `{id, title, chat: {title, messages,
history: {messages: {id: {role, content, timestamp, parentId, childrenIds}}, currentId}}, created_at,
updated_at}`.

`history` is the tree (edits and regenerations branch it) and `currentId` the message the chat shows
last: the whole tree is imported (`records.tree_records`), the path up from `currentId` (else from the
newest leaf) as the active path and every other branch off it, as a branch the chat switches to. Without
a history, `chat.messages` (the visible list) is imported as it is. Timestamps are Unix seconds, in some
versions milliseconds (told apart by size). A picture a user sent, kept in the chat as a data: URL, is
the message's image (`_pictures_take`). A message of attachments only says what the others were
("[image]" for a picture kept elsewhere, "[file: name]"); other messages with no text (a reply stopped
before its first word) are counted in `omitted["empty_messages"]`. The chat's own system prompt
(`chat.params.system`, set in its Chat Controls) is the imported chat's: Open WebUI sends it before the
messages. A reply's reasoning block (`<details type="reasoning">` before its answer; `<think>…</think>`
in older versions) is its thinking (Message.reasoning). A reply with no text in `content` is read from
its `output` items (Open WebUI 0.10's structured reply: `message` items the answer, `reasoning` items
the thinking). A reply that failed (`error: {"content": ...}`; in older versions `error: true`, the
error written as its text) is kept failed, with its error.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from chatapp.providers.thinking import blank_lines_off, think_split

from . import records


def is_chat(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("chat"), dict)


def _title(item: Any) -> str:
    if not isinstance(item, dict):
        return ""
    chat = item.get("chat")
    if not isinstance(chat, dict):
        chat = {}
    for title in (item.get("title"), chat.get("title")):
        if isinstance(title, str) and title.strip():
            return title
    return ""


def conversation_parse(item: Any, *, index: int) -> records.ConversationRecord:
    return records.conversation_parsed(item, _parse, index=index, title=_title(item))


def _parse(item: Any) -> records.ConversationRecord:
    if not is_chat(item):
        raise records.ConversationError(
            f'is not an Open WebUI chat (found {records.describe(item)}, without a "chat" object)'
        )
    chat = item["chat"]
    omitted: Counter[str] = Counter()
    history = chat.get("history")
    nodes = history.get("messages") if isinstance(history, dict) else None
    if isinstance(nodes, dict) and nodes:
        tree: dict[str, records.TreeNode] = {}
        for number, (key, node) in enumerate(nodes.items(), 1):
            record = _message(node, what=f"message {number}", omitted=omitted)
            parent, stamp = node.get("parentId"), node.get("timestamp")  # _message checked it is an object
            tree[str(key)] = records.tree_node(record, parent=parent, stamp=stamp, what="a parentId")
        messages = records.tree_records(tree, history.get("currentId"))
    else:
        listed = chat.get("messages", [])
        if not isinstance(listed, list):
            raise records.ConversationError(f'its "messages" is {records.describe(listed)}, not a list')
        messages = [
            record for number, node in enumerate(listed, 1)
            if (record := _message(node, what=f"message {number}", omitted=omitted)) is not None
        ]
    params = chat.get("params")
    system = params.get("system") if isinstance(params, dict) else None
    created = records.epoch_time(item.get("created_at"), what="created_at") or records.epoch_time(
        chat.get("timestamp"), what="the chat's timestamp"
    )
    updated = records.epoch_time(item.get("updated_at"), what="updated_at")
    return records.ConversationRecord(
        source_id=records.source_id_of(item.get("id") or chat.get("id")),
        title=_title(item),
        system_prompt=system if isinstance(system, str) else "",
        created_at=created,
        updated_at=updated,
        # Pinned in Open WebUI's sidebar (`pinned`, with no date of its own): pinned here since its last activity.
        pinned_at=(updated or created or datetime.now(UTC)) if item.get("pinned") is True else None,
        archived_at=(updated or created or datetime.now(UTC)) if item.get("archived") is True else None,
        messages=messages,
        omitted={reason: n for reason, n in omitted.items() if n},
    )


def _message(node: Any, *, what: str, omitted: Counter[str]) -> records.MessageRecord | None:
    role = records.role_of(records.object_of(node, what=what).get("role"), what=what)
    text = _content_text(node.get("content"), what=what)
    thinking, text = _thinking_lifted(text) if role == "assistant" else ("", text)
    if role == "assistant" and not text.strip():
        # Open WebUI 0.10 keeps a reply as items in `output`, which its page shows before `content`;
        # some of its versions stored `content` empty: the reply would be dropped as one with no text.
        output_thinking, output_text = _output_read(node.get("output"))
        text, thinking = output_text or text, thinking or output_thinking
    if not text.strip() and not thinking:
        # A picture or a file sent alone has no text: dropped, its answer would answer nothing.
        text = _attachments_text(node.get("files"))
    failure = _failure(node.get("error")) if role == "assistant" else ""
    shown_as_answer = None
    if role == "assistant" and node.get("error") is True and text.strip():
        # Versions before the error object marked a failed reply `error: true` and wrote the error in its
        # text, which their page shows as the error (`message.error.content ?? message.content`).
        failure, text, shown_as_answer = text.strip(), "", text
    if not text.strip() and not thinking and not failure:
        omitted["empty_messages"] += 1
        return None
    record = records.other_app_message(
        role, text, model=node.get("model"),
        created_at=records.epoch_time(node.get("timestamp"), what=f"{what}'s timestamp"),
    )
    if thinking:
        record.extra["reasoning"] = thinking
    if failure:
        # Shown with its error, as Open WebUI shows it, and never sent to the model, as a failed reply here.
        record.status, record.extra["error"] = "error", failure
    if shown_as_answer is not None:  # as imported before `error: true` was read: found, not imported again
        record.fingerprint_status, record.fingerprint_content = "complete", shown_as_answer
    if role == "user":
        _pictures_take(record, node)
    return record


# An image Open WebUI keeps in the chat itself (not a link to its own server's files).
_DATA_IMAGE = "data:image/"
_PLACEHOLDER = "[image]"


def _pictures_take(record: records.MessageRecord, node: dict[str, Any]) -> None:
    """The pictures a user message holds as data: URLs (its `files`, its content's `image_url` parts)
    become its images, checked when stored as a send's are; their "[image]" placeholders leave its
    text. The text with them stays what is stored if the pictures cannot be taken (import_writing),
    and what the chat's fingerprint is made of, as it was before pictures were read."""
    files = node.get("files")
    # Not a list (a damaged file): no pictures, as for none; iterating a number would crash the whole job.
    pictures = [{"data": item["url"], "name": item.get("name") if isinstance(item.get("name"), str) else ""}
                for item in (files if isinstance(files, list) else ())
                if isinstance(item, dict) and _is_data_image(item.get("url"))]
    content = node.get("content")
    for part in content if isinstance(content, list) else []:
        url = part.get("image_url") if isinstance(part, dict) else None
        url = url.get("url") if isinstance(url, dict) else url
        if _is_data_image(url):
            pictures.append({"data": url, "name": ""})
    if not pictures:
        return
    lines = record.content.split("\n")
    for _ in pictures:
        if _PLACEHOLDER in lines:
            lines.remove(_PLACEHOLDER)
    record.extra["images"], record.extra["images_fallback"] = pictures, record.content
    record.fingerprint_content, record.content = record.content, "\n".join(lines)


def _is_data_image(url: Any) -> bool:
    return isinstance(url, str) and url.startswith(_DATA_IMAGE)


def _failure(error: Any) -> str:
    """The error a reply failed with, as Open WebUI keeps it (`error: {"content": "..."}`); "" if none."""
    content = error.get("content") if isinstance(error, dict) else None
    return content if isinstance(content, str) and content.strip() else ""


# How Open WebUI keeps a reasoning model's thinking in the reply's text: a block before the answer,
# its lines quoted ("> "), HTML-escaped by newer versions. The line end after it is left to the answer:
# it tells the first line's indentation (kept) from spaces after the tag.
_THINKING_BLOCK = re.compile(
    r'\s*<details\s+type="reasoning"[^>]*>\s*(?:<summary>.*?</summary>)?(.*?)</details>[ \t]*(?=\r?\n|\Z)', re.DOTALL
)


def _thinking_lifted(text: str) -> tuple[str, str]:
    """(thinking, answer) of a reply: left in the answer, the thinking would be sent back to the model
    at every turn, counted, summarized and searched, which a reply streamed here never is."""
    thoughts = []
    while found := _THINKING_BLOCK.match(text):
        lines = found.group(1).strip("\r\n").splitlines()
        if all(line.startswith("&gt;") or not line.strip() for line in lines):
            lines = html.unescape("\n".join(lines)).splitlines()
        thoughts.append("\n".join(line[2:] if line.startswith("> ") else line.removeprefix(">") for line in lines))
        text = text[found.end():]
    if not thoughts:  # versions before the block kept the model's own <think>…</think> as it came
        thinking, answer = think_split(text)
        return (thinking.strip(), answer) if thinking.strip() else ("", text)
    return "\n\n".join(t.strip() for t in thoughts if t.strip()), blank_lines_off(text)


def _output_read(output: Any) -> tuple[str, str]:
    """(thinking, answer) of a reply's `output` items (Responses-style), read as Open WebUI's page reads
    them: the answer is the text of its `message` items, a line each; the thinking, its `reasoning`
    items' summary (else their content)."""
    thoughts, answers = [], []
    for item in output if isinstance(output, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            answers.append(_parts_text(item.get("content")))
        elif item.get("type") == "reasoning":
            summary = item.get("summary")
            thoughts.append(_parts_text(item.get("content") if summary is None else summary).strip())
    return "\n\n".join(t for t in thoughts if t), "\n".join(a for a in answers if a.strip())


def _parts_text(parts: Any) -> str:
    """The text of an output item's parts ([{"type": "output_text", "text": ...}, ...]), joined."""
    if not isinstance(parts, list):
        return ""
    return "".join(part["text"] for part in parts if isinstance(part, dict) and isinstance(part.get("text"), str))


def _content_text(content: Any, *, what: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI-style parts: [{"type": "text", "text": ...}, {"type": "image_url"}]
        texts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, dict):
                kind = str(part.get("type") or "attachment")
                texts.append("[image]" if "image" in kind else f"[{kind}]")
        return "\n".join(texts)
    raise records.ConversationError(f"{what}'s content is {records.describe(content)}, not text")


def _attachments_text(files: Any) -> str:
    """What a message's `files` were, one placeholder a line ("[image]", "[file: notes.pdf]"), as the
    ChatGPT import marks a picture: the files themselves are not in the export."""
    if not isinstance(files, list):
        return ""
    lines = []
    for item in files:
        if not isinstance(item, dict):
            continue
        kind, media = str(item.get("type") or ""), str(item.get("content_type") or "")
        name = item.get("name")
        if "image" in kind or media.startswith("image/"):
            lines.append("[image]")
        elif isinstance(name, str) and name.strip():
            lines.append(f"[file: {' '.join(name.split())[:200]}]")
        else:
            lines.append("[file]")
    return "\n".join(lines)
