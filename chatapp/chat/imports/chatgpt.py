"""ChatGPT's `conversations.json` (Settings → Data controls → Export): a list of conversations, each a
tree of messages in `mapping` ({node id: {message, parent, children}}) whose visible branch ends at
`current_node`.

The whole tree is imported (`records.tree_records`): the path to `current_node` (else to the newest
leaf) is the active path, and every other branch (an edited question's first version, a regenerated
answer's siblings) is stored off it, as a branch the chat's `< n/m >` switches to. Left out and
counted: tool messages (browsing results, code output: this app has no tool role), the model's calls
to tools that ChatGPT's page hides (a DALL·E prompt, a browser search; its code for "python" and its
canvas stay), hidden messages with text (ChatGPT's custom-instruction context), and user or
assistant messages with no text; their children hang from the nearest stored message above them.
Empty system messages (every tree's root) are skipped silently. Text parts are joined; a part that
is not text (an image) becomes "[image]"; a voice message is its transcription (its recording
"[audio]" only when it has none). A reply keeps how it ended (`metadata.finish_details`): stopped by
the user, or cut at the output limit. A reasoning model's thoughts, kept in nodes above its reply,
are that reply's thinking.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from . import records

# ChatGPT's roles: this app's, and a tool's (left out and counted).
_ROLES = (*records.ROLES, "tool")
# What a voice recording without a transcription reads as (a picture reads "[image]").
_AUDIO = "[audio]"


def is_conversation(value: Any) -> bool:
    return isinstance(value, dict) and "mapping" in value


def conversation_parse(conversation: Any, *, index: int) -> records.ConversationRecord:
    title = conversation.get("title") if isinstance(conversation, dict) else None
    return records.conversation_parsed(conversation, _parse, index=index, title=title)


def _parse(conversation: Any) -> records.ConversationRecord:
    if not is_conversation(conversation):
        raise records.ConversationError(
            f'is not a ChatGPT conversation (found {records.describe(conversation)}, without "mapping")'
        )
    mapping = conversation["mapping"]
    if not isinstance(mapping, dict):
        raise records.ConversationError(f'its "mapping" is {records.describe(mapping)}, not an object of messages')
    omitted: Counter[str] = Counter()
    nodes: dict[str, records.TreeNode] = {}
    thoughts: dict[str, str] = {}  # a reasoning model's thinking, by the id of the node that holds it
    calls: dict[str, records.MessageRecord] = {}  # hidden tool calls, by node: left out (_hidden_call)
    number = 0  # messages are counted as a person reads the file: nodes without one (the root) aside
    for key, node in mapping.items():
        message = records.object_of(node, what="a node of its mapping").get("message")
        number += message is not None
        thinking = _thinking_of(message)
        if thinking is not None:
            record = None  # not a message: the thinking of the reply below it
            thoughts[str(key)] = thinking
        else:
            record = None if message is None else _message(message, what=f"message {number}", omitted=omitted)
            if record is not None and record.role == "assistant" and _hidden_call(message):
                omitted["tool_calls"] += 1
                calls[str(key)] = record
                record = None
        stamp = message.get("create_time") if message is not None else None  # _message checked it
        nodes[str(key)] = records.tree_node(record, parent=node.get("parent"), stamp=stamp, what="a parent")
    _thinking_hand_down(nodes, thoughts)
    earlier = _earlier_reading(nodes, calls, conversation.get("current_node")) if calls else None
    messages = records.tree_records(nodes, conversation.get("current_node"))
    title = conversation.get("title")
    created = records.epoch_time(conversation.get("create_time"), what="create_time")
    updated = records.epoch_time(conversation.get("update_time"), what="update_time")
    parsed = records.ConversationRecord(
        source_id=records.source_id_of(conversation.get("conversation_id") or conversation.get("id")),
        title=title if isinstance(title, str) else "",
        created_at=created,
        updated_at=updated,
        # Archived in ChatGPT (`is_archived`, with no date of its own): archived here since its last activity.
        archived_at=(updated or created or datetime.now(UTC)) if conversation.get("is_archived") is True else None,
        messages=messages,
        omitted={reason: n for reason, n in omitted.items() if n},
    )
    if earlier is not None:
        as_before = dataclasses.replace(parsed, messages=earlier)
        parsed.earlier_fingerprints = (records.record_fingerprint(as_before),
                                       records.record_fingerprint_shown_branch(as_before))
    return parsed


def _earlier_reading(nodes: dict[str, records.TreeNode], calls: dict[str, records.MessageRecord],
                     leaf: Any) -> list[records.MessageRecord]:
    """The messages as readers before the hidden calls were left out stored them (the calls among the
    replies), on copies: `tree_records` sets the links of the records it is given."""
    before = copy.deepcopy(nodes)
    for key, call in calls.items():
        before[key].record = copy.deepcopy(call)
    return records.tree_records(before, leaf)


def _thinking_of(message: Any) -> str | None:
    """The thinking a reasoning model's node holds, None for any other node. ChatGPT keeps it above
    the reply, in nodes of their own: the thoughts (`thoughts`: a summary and its text each) and a
    label saying how long it took (`reasoning_recap`, "Thought for 12s": no thinking of its own)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, dict):
        return None
    kind = content.get("content_type")
    if kind == "reasoning_recap":
        return ""
    if kind != "thoughts":
        return None
    listed = content.get("thoughts")
    parts = []
    for thought in listed if isinstance(listed, list) else []:
        if isinstance(thought, dict):
            lines = [thought.get(name) for name in ("summary", "content")]
            parts.append("\n".join(line.strip() for line in lines if isinstance(line, str) and line.strip()))
    return "\n\n".join(part for part in parts if part)


def _thinking_hand_down(nodes: dict[str, records.TreeNode], thoughts: dict[str, str]) -> None:
    """Each reply's thinking (`reasoning`, shown folded, never sent back): what the thinking nodes
    between it and the message above it hold, in order. A walk that meets a node twice (a loop, which
    tree_records refuses) stops."""
    for node in nodes.values():
        record = node.record
        if record is None or record.role != "assistant":
            continue
        found: list[str] = []
        seen: set[str] = set()
        up = node.parent
        while up is not None and up in nodes and nodes[up].record is None and up not in seen:
            seen.add(up)
            if thoughts.get(up):
                found.append(thoughts[up])
            up = nodes[up].parent
        if found:
            record.extra["reasoning"] = "\n\n".join(reversed(found))


def _message(message: Any, *, what: str, omitted: Counter[str]) -> records.MessageRecord | None:
    author = records.object_of(message, what=what).get("author")
    role = records.role_of(author.get("role") if isinstance(author, dict) else None, what=what, roles=_ROLES)
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
    record = records.other_app_message(
        role, text, model=metadata.get("model_slug"),
        created_at=records.epoch_time(message.get("create_time"), what=f"{what}'s create_time"),
        updated_at=records.epoch_time(message.get("update_time"), what=f"{what}'s update_time"),
    )
    content = message.get("content")
    if isinstance(content, dict) and content.get("content_type") == "code":
        # Imports before the longer fence wrapped all code in three backticks: a chat imported then
        # must still be found by its fingerprint, not imported again.
        as_before = f"```\n{content.get('text')}\n```"
        if text != as_before:
            record.fingerprint_content = as_before
    if role == "assistant":
        _ending_read(record, metadata.get("finish_details"))
    return record


def _hidden_call(message: Any) -> bool:
    """Whether an assistant message is a call ChatGPT's page does not show: one addressed to a tool
    (`recipient` is "all" for what the user reads) other than the code it runs ("python", shown as a
    code block) and its canvas ("canmore.…", the document the user wrote with it)."""
    recipient = message.get("recipient")
    if not isinstance(recipient, str) or recipient in ("all", ""):
        return False
    return recipient != "python" and not recipient.startswith("canmore.")


def _ending_read(record: records.MessageRecord, finish: Any) -> None:
    """How the reply ended, as ChatGPT's page showed it: stopped by the user (`interrupted`) is a stopped
    reply here, cut at the model's output limit (`max_tokens`, where ChatGPT offered "Continue
    generating") a reply cut at the output limit (`finish_reason` "length": its note offers Continue)."""
    kind = finish.get("type") if isinstance(finish, dict) else None
    if kind == "interrupted":
        record.status, record.fingerprint_status = "stopped", record.status
    elif kind == "max_tokens":
        record.extra["finish_reason"] = "length"


def _content_text(content: Any, *, what: str) -> str:
    if content is None:
        return ""
    parts = records.object_of(content, what=f"{what}'s content").get("parts")
    if isinstance(parts, list):
        texts = [text for text in (_part_text(part) for part in parts) if text]
        if any(text != _AUDIO for text in texts):
            # A voice message's words are its transcription part: the recording beside it adds nothing.
            texts = [text for text in texts if text != _AUDIO]
        return "\n".join(texts)
    text = content.get("text")
    if isinstance(text, str):
        # A code message is the model's code for a tool (ChatGPT shows it as a code block).
        return _code_block(text) if content.get("content_type") == "code" and text.strip() else text
    return ""  # content types with no text to show (hidden reasoning, browsing state)


def _code_block(code: str) -> str:
    """`code` as a Markdown code block that no run of backticks inside it closes: CommonMark closes a
    fence on a run at least as long as its own, so code that writes Markdown (a README, a ``` block)
    gets a longer fence, not one its own lines end (the rest then drawn as Markdown)."""
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`{3,}", code)), default=0) + 1)
    return f"{fence}\n{code}\n{fence}"


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        if isinstance(part.get("text"), str):  # an audio transcription
            return str(part["text"])
        kind = str(part.get("content_type") or "")
        if "audio" in kind or "video" in kind:  # a voice message's recording (also with the camera on)
            return _AUDIO
        if "image" in kind or "asset_pointer" in part:
            return "[image]"
        return f"[{kind or 'attachment'}]"
    return ""
