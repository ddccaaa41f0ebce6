"""The neutral shape every importer produces, and the checks they share. No Django: the parsers are
pure functions of a parsed JSON document, tested without a database.

A `ConversationRecord` is what the service stores for one conversation: its title and dates, and its
messages in the order they are stored (the app orders messages by id, so list order is conversation
order). References between messages (a reply's question, a summary's covered range, an edited
summary's original) are by the source's own ids (`MessageRecord.ref`), mapped to the new ids when the
rows exist."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

ROLES = ("system", "user", "assistant")
KINDS = ("chat", "summary")
STATUSES = ("complete", "streaming", "stopped", "error")
# Message columns that refer to another message of the same conversation (stored as `link_column(name)`).
# `parent` and `off_path_by`: the message tree and its hidden branches (issue 13, branches).
LINK_FIELDS = ("reply_to", "edited_from", "covers_from", "covers_through", "parent", "off_path_by")


def link_column(name: str) -> str:
    """The stored column (and the export's key) of a link: `<name>_id`, but `off_path_by` is a plain id."""
    return name if name == "off_path_by" else f"{name}_id"
# PositiveIntegerField's upper bound on every database Django supports.
MAX_INT = 2_147_483_647
# Message.model's column width: every format's model name is held to it.
MODEL_MAX_CHARS = 200


class ImportFileError(Exception):
    """The file as a whole cannot be imported (not JSON, truncated, not a known export): nothing is."""


class ConversationError(Exception):
    """One conversation of the file cannot be imported as it is; the others can."""


@dataclass(slots=True)
class MessageRecord:
    role: str
    content: str
    created_at: datetime | None = None
    updated_at: datetime | None = None
    kind: str = "chat"
    status: str = "complete"
    pinned: bool = False
    superseded: bool = False
    # The source's id of this message ("" when nothing refers to it).
    ref: str = ""
    # LINK_FIELDS name -> the source id of the message it refers to.
    links: dict[str, str] = field(default_factory=dict)
    # Other stored columns, already checked: model, usage, cost, error, summary details.
    extra: dict[str, Any] = field(default_factory=dict)
    # A summary's pinned messages it passed over (the source ids), where the file says (our export):
    # None where it does not.
    skipped_pins: list[str] | None = None
    # What the fingerprint reads for `status`, `content` where set: a chat imported when a ChatGPT reply its
    # user stopped was read complete, or an old Open WebUI failed reply an answer of its error, is found.
    fingerprint_status: str | None = None
    fingerprint_content: str | None = None


@dataclass(slots=True)
class ConversationRecord:
    title: str
    created_at: datetime | None
    updated_at: datetime | None
    messages: list[MessageRecord]
    title_is_custom: bool = True
    system_prompt: str = ""  # the chat's own system prompt (our format, Open WebUI's chat params)
    # Our own format only: the model the chat used ({"name", "model"}), whether it was the offline
    # demo model, and the source id of its verbatim window's first message.
    llm_config: dict[str, Any] | None = None
    offline: bool = False
    window_start_ref: str = ""
    # What the source had that was not imported, by reason ("tool_messages": 3, ...).
    omitted: dict[str, int] = field(default_factory=dict)
    # The source's own id of the conversation ("" when it has none): part of its fingerprint.
    source_id: str = ""
    # Pinned to the top of the sidebar, since when (our format; Open WebUI's pins have no date: its last
    # activity). Like the title, not part of the fingerprint: a person pins and unpins.
    pinned_at: datetime | None = None
    # Archived (out of the sidebar), since when: our format, ChatGPT's `is_archived` and Open WebUI's
    # `archived` (with no date of their own: the last activity). Not part of the fingerprint either.
    archived_at: datetime | None = None
    # The name of the folder it was in ("" for none; our format): the import files it in the owner's
    # folder of that name. Not part of the fingerprint either: a person moves chats.
    folder: str = ""
    # Fingerprints earlier readers gave it (ChatGPT's hidden calls): a chat imported then is found by them.
    earlier_fingerprints: tuple[str, ...] = ()


def record_fingerprint(record: ConversationRecord) -> str:
    """What makes two imported conversations the same one: the source's id for it, its start, system
    prompt and messages (roles, kinds, texts, dates, the tree they make), not its title, which a person
    renames, nor which branch it showed: looking at another version of an answer there adds nothing.
    A later export of the same chat (ChatGPT's hold every chat each time) gives the same fingerprint
    and is not imported again; a chat continued since gives another and is imported as a new chat,
    so nothing in the file is lost. Two chats with neither an id nor a date that say the same words
    would be one: their titles tell them apart. SHA-256 of a canonical JSON, 64 hex digits."""
    # A tree says where each message hangs (its parent's id); a plain list, by a replaced reply's off-path mark.
    tree = any("parent" in m.links for m in record.messages)
    return _fingerprint(record, place=lambda m: m.links.get("parent") if tree else m.superseded)


def record_fingerprint_shown_branch(record: ConversationRecord) -> str:
    """The fingerprint imports stored before the shown branch was left out of it (each message marked
    off the shown path or not): still looked for, so a chat imported then is not imported again."""
    return _fingerprint(record, place=lambda m: m.superseded)


def _fingerprint(record: ConversationRecord, *, place: Callable[[MessageRecord], Any]) -> str:
    messages = [
        [m.role, m.kind, m.fingerprint_status or m.status, m.content if m.fingerprint_content is None
         else m.fingerprint_content, place(m),
         m.created_at.isoformat() if m.created_at else None]
        for m in record.messages
    ]
    started = record.created_at.isoformat() if record.created_at else None
    undated = started is None and not any(m.created_at for m in record.messages)
    title = record.title if undated and not record.source_id else None
    identity = [record.source_id, title, started, record.system_prompt, messages]
    canonical = json.dumps(identity, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def source_id_of(value: Any) -> str:
    """A conversation's id in its source, as text (a string or a whole number; anything else: none)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return ""
    return str(value)[:200]


def describe(value: Any) -> str:
    """What a JSON value is, in the words an error message uses."""
    if isinstance(value, dict):
        keys = ", ".join(list(value)[:8]) + (", …" if len(value) > 8 else "")
        return f"an object with keys {keys}" if value else "an empty object"
    if isinstance(value, list):
        return f"a list of {len(value)} items" if value else "an empty list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    return "null"


def where(index: int, title: Any) -> str:
    """How errors name a conversation: 1-based, as a person counts, with its title when it has one."""
    if isinstance(title, str) and title.strip():
        short = " ".join(title.split())
        short = short if len(short) <= 60 else short[:59] + "…"
        return f"conversation {index + 1} ('{short}')"
    return f"conversation {index + 1}"


def conversation_parsed(
    item: Any, parse: Callable[[Any], ConversationRecord], *, index: int, title: Any
) -> ConversationRecord:
    """`parse(item)`, with its error saying which conversation of the file it is about (`where`)."""
    try:
        return parse(item)
    except ConversationError as exc:
        raise ConversationError(f"{where(index, title)}: {exc}") from None


def object_of(value: Any, *, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConversationError(f"{what} is {describe(value)}, not an object")
    return value


def role_of(value: Any, *, what: str, roles: tuple[str, ...] = ROLES) -> str:
    if value is None:
        raise ConversationError(f"{what} has no role")
    if value not in roles:
        raise ConversationError(f"{what} has role {value!r}: expected one of {', '.join(roles)}")
    return str(value)


def other_app_message(
    role: str, text: str, *, model: Any, created_at: datetime | None, updated_at: datetime | None = None
) -> MessageRecord:
    """A message from another app's export, with the model name its source gives (cut to the column)
    kept on a reply only: only a reply was written by a model."""
    named = role == "assistant" and isinstance(model, str)
    return MessageRecord(
        role=role,
        content=text,
        created_at=created_at,
        updated_at=updated_at,
        extra={"model": model[:MODEL_MAX_CHARS]} if named else {},
    )


def epoch_time(value: Any, *, what: str) -> datetime | None:
    """A Unix timestamp (seconds, or milliseconds / microseconds when it is too large to be seconds:
    exporters differ) as an aware UTC datetime; None for null."""
    if value is None:
        return None
    try:
        seconds = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    except OverflowError:  # an integer too large for a float: no date
        seconds = math.nan
    if not math.isfinite(seconds):
        raise ConversationError(f"{what} is not a timestamp (found {describe(value)})")
    # 1e11 s is the year 5138 while 1e11 ms is 1973: beyond it the number counts smaller units.
    while abs(seconds) >= 1e11:
        seconds /= 1000
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise ConversationError(f"{what} is not a valid timestamp ({value!r})") from None


def stamp_of(value: Any) -> float:
    """A timestamp as a number to order siblings by (any unit: only the order matters); -inf when
    there is none."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return float("-inf")
    try:
        return float(value)
    except OverflowError:  # a huge integer: after every real date
        return float("inf")


def iso_time(value: Any, *, what: str) -> datetime | None:
    """An ISO 8601 date as our export writes it (naive ones taken as UTC); None for null."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConversationError(f"{what} is not a date (found {describe(value)})")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ConversationError(f"{what} is not an ISO 8601 date ({value[:40]!r})") from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    try:
        # Stored in UTC: a date valid as written can leave the calendar there (9999-12-31T23:30-05:00).
        return parsed.astimezone(UTC)
    except OverflowError:
        raise ConversationError(f"{what} is out of range in UTC ({value[:40]!r})") from None


def text_of(value: Any, *, what: str, allow_null: bool = False) -> str:
    if value is None and allow_null:
        return ""
    if not isinstance(value, str):
        raise ConversationError(f"{what} is not text (found {describe(value)})")
    return value


def count_of(value: Any, *, what: str) -> int | None:
    """A stored count (tokens, milliseconds, characters): a non-negative integer or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
        raise ConversationError(f"{what} must be a whole number from 0 to {MAX_INT} (found {value!r})")
    return value


def flag_of(value: Any, *, what: str) -> bool:
    if not isinstance(value, bool):
        raise ConversationError(f"{what} must be true or false (found {describe(value)})")
    return value


def cost_of(value: Any, *, what: str) -> Decimal | None:
    """A cost in dollars (our export writes it as a string, to keep every digit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConversationError(f"{what} is not an amount (found {describe(value)})")
    try:
        amount = Decimal(str(value))
    except ArithmeticError:
        raise ConversationError(f"{what} is not an amount ({str(value)[:20]!r})") from None
    # The column holds 12 digits, 6 after the point.
    if not amount.is_finite() or not 0 <= amount < 1_000_000:
        raise ConversationError(f"{what} must be from 0 to 999999.999999 dollars (found {value!r})")
    return amount.quantize(Decimal("0.000001"))


@dataclass(slots=True)
class TreeNode:
    """One node of a source's message tree, as `tree_records` reads it."""

    parent: str | None  # the source id of its parent (None, or an id not in the tree: a root)
    record: MessageRecord | None  # None: a node that is not stored (an empty root, a tool call)
    stamp: float  # its time, to order siblings (earliest first); -inf when it has none


def tree_node(record: MessageRecord | None, *, parent: Any, stamp: Any, what: str) -> TreeNode:
    """A node of a source's tree, its parent id checked (`what` names the source's parent field)."""
    if parent is not None and not isinstance(parent, str):
        raise ConversationError(f"{what} is {describe(parent)}, not a string")
    return TreeNode(parent=parent, record=record, stamp=stamp_of(stamp))


def tree_records(nodes: dict[str, TreeNode], leaf: Any) -> list[MessageRecord]:
    """The stored messages of a source's tree, every branch kept, in an order where each follows its
    parent (the app reads a path in id order), with the links the app's tree needs.

    A node that is not stored hands its children to its nearest stored ancestor. The active path runs
    from the root to `leaf`, the source's own "current message" value as the file has it (its nearest
    stored ancestor when `leaf` is not stored; the newest stored message with no stored child when
    `leaf` is None, not a string, unknown or above every stored message). Every
    other message is off the path (`superseded`) and tagged (`off_path_by`) with the first message of
    its hidden branch, as the app tags a branch it switches away from: a branch brings back with it
    the path under it through each node's newest child, and any other child starts a hidden branch of
    its own. An assistant message answering a user message gets `reply_to` it. Walks are iterative:
    an export's trees can be thousands of messages deep.
    """
    stored = _stored_parents(nodes)
    children: dict[str | None, list[str]] = {}
    for key in nodes:
        if nodes[key].record is not None:
            children.setdefault(stored[key], []).append(key)
    for kids in children.values():
        kids.sort(key=lambda k: nodes[k].stamp)  # stable: the source's order among equal times
    if not isinstance(leaf, str) or leaf not in nodes or (nodes[leaf].record is None and stored[leaf] is None):
        # no usable leaf: the newest stored message that has no stored child
        ends = [k for k in nodes if nodes[k].record is not None and k not in children]
        leaf = max(ends, key=lambda k: nodes[k].stamp) if ends else None
    active: set[str] = set()
    node_id: str | None = leaf
    while node_id is not None:
        if nodes[node_id].record is not None:
            active.add(node_id)
        node_id = stored[node_id]
    out: list[MessageRecord] = []
    tags: dict[str, str | None] = {}
    stack = list(reversed(children.get(None, [])))
    while stack:
        key = stack.pop()
        parent = stored[key]
        if key in active:
            tag = None
        elif parent is None or parent in active or children[parent][-1] != key:
            tag = key  # the first message of a hidden branch
        else:
            tag = tags[parent]  # the newest child carries on its parent's branch
        tags[key] = tag
        out.append(_linked(nodes, key, parent=parent, tag=tag))
        stack.extend(reversed(children.get(key, [])))
    return out


def _stored_parents(nodes: dict[str, TreeNode]) -> dict[str, str | None]:
    """Each node's nearest stored ancestor (None: none). A loop anywhere above a node, through
    stored nodes or not, is an error: the tree could never be read from a root."""
    nearest: dict[str, str | None] = {}
    settled: set[str] = set()  # nodes whose whole way up is known to end at a root
    for start in nodes:
        chain: list[str] = []
        on_chain: set[str] = set()
        node_id: str | None = start
        while node_id is not None and node_id not in settled:
            if node_id in on_chain:
                raise ConversationError(f"its message tree loops back to {node_id!r}")
            on_chain.add(node_id)
            chain.append(node_id)
            parent = nodes[node_id].parent
            node_id = parent if parent in nodes else None
        # walk the chain back down: each node's nearest stored ancestor is its parent when that is
        # stored, else its parent's nearest one
        for key in reversed(chain):
            parent = nodes[key].parent
            if parent is None or parent not in nodes:
                nearest[key] = None
            else:
                nearest[key] = parent if nodes[parent].record is not None else nearest[parent]
            settled.add(key)
    return nearest


def _linked(nodes: dict[str, TreeNode], key: str, *, parent: str | None, tag: str | None) -> MessageRecord:
    record = nodes[key].record
    assert record is not None  # only stored nodes are linked
    record.ref = key
    record.superseded = tag is not None
    if parent is not None:
        record.links["parent"] = parent
        parent_record = nodes[parent].record
        if record.role == "assistant" and parent_record is not None and parent_record.role == "user":
            record.links["reply_to"] = parent
    if tag is not None:
        record.links["off_path_by"] = tag
    return record
