"""Writes of saved prompts (prompt_models): create, update, delete. Each refusal is a ValidationError
naming its field, so the API and Settings' forms say it beside the field."""

from __future__ import annotations

import codecs
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from .prompt_models import COMMAND_PATTERN, SavedPrompt
from .textsafe import cluster_edge, text_blank, text_storable

MAX_PROMPTS_PER_USER = 200
# The box's own commands: a saved prompt cannot take their names.
RESERVED_COMMANDS = frozenset({"compact"})


def _cleaned(*, command: str, title: str, content: str) -> dict[str, str]:
    command = command.strip().removeprefix("/").lower()
    title = " ".join(text_storable(title).split())
    content = text_storable(content).replace("\r\n", "\n")
    errors: dict[str, str] = {}
    if not re.fullmatch(COMMAND_PATTERN, command):
        errors["command"] = ("Use 1 to 40 lowercase letters, digits, “-” or “_”, starting with a letter or digit "
                             "(typed after “/” in the message box).")
    elif command in RESERVED_COMMANDS:
        errors["command"] = f"“/{command}” is the message box's own command: choose another."
    if not title:
        title = command[:100]  # a command refused for its length is not also a title refused for it
    if len(title) > 100:
        errors["title"] = "Ensure this field has no more than 100 characters."
    if text_blank(content):  # white space, or only characters that do not show (a zero-width space)
        errors["content"] = "Write the prompt's text."
    elif len(content) > settings.MAX_MESSAGE_CHARS:
        errors["content"] = f"A prompt is at most {settings.MAX_MESSAGE_CHARS:,} characters, as a message is."
    if errors:
        raise ValidationError(errors)
    return {"command": command, "title": title, "content": content}


def prompt_fields_check(*, command: str, title: str, content: str) -> None:
    """Raise the ValidationError (by field) a prompt of these fields would be refused with, writing nothing:
    Settings' form says the service's words on the fields it did not refuse itself, all at once."""
    _cleaned(command=command, title=title, content=content)


def _taken(command: str) -> ValidationError:
    return ValidationError({"command": f"You already have a prompt “/{command}”."})


def prompt_create(*, owner: User, command: str, title: str = "", content: str) -> SavedPrompt:
    fields = _cleaned(command=command, title=title, content=content)
    if SavedPrompt.objects.filter(owner=owner).count() >= MAX_PROMPTS_PER_USER:
        raise ValidationError(f"You hold {MAX_PROMPTS_PER_USER} prompts, the most there can be: delete one first.")
    try:
        with transaction.atomic():  # a clash is refused by the unique constraint, whatever the race
            return SavedPrompt.objects.create(owner=owner, **fields)
    except IntegrityError:
        raise _taken(fields["command"]) from None


def prompt_update(*, prompt: SavedPrompt, command: str | None = None, title: str | None = None,
                  content: str | None = None) -> SavedPrompt:
    """Change what is given (None: kept)."""
    fields = _cleaned(
        command=prompt.command if command is None else command,
        title=prompt.title if title is None else title,
        content=prompt.content if content is None else content,
    )
    for name, value in fields.items():
        setattr(prompt, name, value)
    try:
        with transaction.atomic():
            prompt.save(update_fields=[*fields, "updated_at"])
    except IntegrityError:
        raise _taken(fields["command"]) from None
    return prompt


def prompt_delete(*, prompt: SavedPrompt) -> None:
    prompt.delete()


@dataclass
class PromptsImported:
    """What an import did: the commands added, those skipped (already yours), those given again in
    the file after one was added, those left out for the limit, and the items refused, each with why."""

    added: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)
    over_limit: list[str] = field(default_factory=list)
    cut: list[tuple[str, str]] = field(default_factory=list)  # (the file's command, the one added)
    refused: list[str] = field(default_factory=list)


def _unmarked(data: bytes) -> bytes:
    """The file's JSON as UTF-8, without the byte order mark a Windows tool writes first (Notepad's
    "UTF-8 with BOM", PowerShell 5's UTF-16), which JSON's RFC lets a reader ignore and orjson refuses."""
    if data.startswith(codecs.BOM_UTF8):
        return data[len(codecs.BOM_UTF8):]
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16").encode()
        except UnicodeDecodeError:
            return data  # refused below as not JSON
    return data


def _file_items(data: bytes) -> list[Any]:
    try:
        items = orjson.loads(_unmarked(data))
    except orjson.JSONDecodeError:
        raise ValidationError("The file is not JSON: choose a prompts file exported here or from Open WebUI.") from None
    if isinstance(items, dict) and isinstance(items.get("prompts"), list):
        items = items["prompts"]
    # Objects none of which has a command or a text are another file (chats exported from Open WebUI or
    # ChatGPT, lists of objects too), not prompts each to be refused.
    if (not isinstance(items, list) or not all(isinstance(item, dict) for item in items)
            or (items and not any("command" in item or "content" in item for item in items))):
        raise ValidationError("Expected a list of prompts, each with a “command” and a “content”, as this page's "
                              "export or Open WebUI's writes them.")
    if not items:
        raise ValidationError("The file holds no prompts.")
    return items


def _item_text(item: dict[str, Any], name: str) -> str:
    value = item.get(name)
    return value if isinstance(value, str) else ""


def _title_fitted(title: str) -> str:
    """A file's title within ours (100 characters), shortened with "…": Open WebUI keeps titles of any
    length, and its prompt is worth importing under the start of its title, where the form refuses one
    typed too long for the user to shorten. Cut between user-perceived characters, as a chat's title."""
    title = " ".join(title.split())
    return title if len(title) <= 100 else title[: cluster_edge(title, 99, forward=False)].rstrip() + "…"


def _command_fitted(command: str) -> str:
    """A file's command within ours: one of our characters only but longer than 40, cut to 40 (Open WebUI
    makes commands of titles, of any length); anything else as it is, for the checks to say why."""
    bare = command.strip().removeprefix("/").lower()
    if len(bare) > 40 and re.fullmatch(r"[a-z0-9][a-z0-9_-]*", bare):
        return bare[:40].rstrip("-_")
    return command


def _command_numbered(command: str, *, taken: Collection[str], numbers: dict[str, int]) -> str:
    """`command`, a file's command cut to 40 characters, numbered ("-2", "-3", …, within the 40) when
    another prompt of the file has it: Open WebUI's commands alike in their first 40 characters
    ("…-formal", "…-informal") are two prompts, both imported. The same file gives the same numbers, so
    importing it again finds each prompt under the command it got. `numbers`: the next number to try
    for each command, so that a file of thousands alike does not count from 2 for each."""
    numbered, number = command, numbers.get(command, 2)
    while numbered in taken:
        numbered = f"{command[: 39 - len(str(number))].rstrip('-_')}-{number}"
        number += 1
    numbers[command] = number
    return numbered


def _item_named(item: dict[str, Any], number: int) -> str:
    """A refused item as a message names it: its command as the file gives it, cut at a word within 40
    characters (a file's "command" may hold a whole text), or its place in the file."""
    command = " ".join(_item_text(item, "command").split())
    if not command:
        return f"item {number}"
    if len(command) > 40:
        command = (command[:40].rsplit(" ", 1)[0] if " " in command[:40] else command[:40]) + "…"
    return f"“{command}”"


def prompts_import(*, owner: User, data: bytes) -> PromptsImported:
    """Add the prompts of a file (this page's export, Open WebUI's, or `{"prompts": [...]}`): each
    checked as one typed in the form; a command the owner already has is skipped, never overwritten,
    so an import loses nothing. A file that is not such a list is refused whole, adding nothing."""
    items = _file_items(data)
    done = PromptsImported()
    # The commands held (and those added here): one already there is skipped before the limit is
    # weighed, so a full account importing its own export is told nothing was missing, not refused.
    held = set(SavedPrompt.objects.filter(owner=owner).values_list("command", flat=True))
    room = MAX_PROMPTS_PER_USER - len(held)
    added: set[str] = set()  # by this import: a command again in the file is not one the owner had
    # The command each cut one took (by the one it was given as), and the file's commands, as given or
    # cut: a cut command another prompt of the file has is numbered (_command_numbered).
    cut_to: dict[str, str] = {}
    numbers: dict[str, int] = {}
    taken = {_item_text(item, "command").strip().removeprefix("/").lower() for item in items}
    for number, item in enumerate(items, start=1):
        given = _item_text(item, "command")
        try:
            # Open WebUI's newer prompts (versions, tags) call the title "name".
            title = _item_text(item, "title") or _item_text(item, "name")
            fields = _cleaned(command=_command_fitted(given), title=_title_fitted(title),
                              content=_item_text(item, "content"))
        except ValidationError as exc:
            why = " ".join(exc.messages)
            done.refused.append(f"{_item_named(item, number)}: {why[:1].lower()}{why[1:]}")
            continue
        named = given.strip().removeprefix("/").lower()
        if fields["command"] != named:
            if named not in cut_to:
                cut_to[named] = _command_numbered(fields["command"], taken=taken, numbers=numbers)
                taken.add(cut_to[named])
            fields["command"] = cut_to[named]
        if fields["command"] in added:
            done.repeated.append(fields["command"])
            continue
        if fields["command"] in held:
            done.skipped.append(fields["command"])
            continue
        if room <= 0:
            done.over_limit.append(fields["command"])
            continue
        try:
            with transaction.atomic():  # one already there (or added meanwhile) is refused by the constraint
                SavedPrompt.objects.create(owner=owner, **fields)
        except IntegrityError:
            done.skipped.append(fields["command"])
            continue
        done.added.append(fields["command"])
        if fields["command"] != named:
            done.cut.append((named, fields["command"]))
        held.add(fields["command"])
        added.add(fields["command"])
        room -= 1
    return done
