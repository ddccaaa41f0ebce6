"""Writes of saved prompts (prompt_models): create, update, delete. Each refusal is a ValidationError
naming its field, so the API and Settings' forms say it beside the field."""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from .prompt_models import COMMAND_PATTERN, SavedPrompt
from .textsafe import text_storable

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
        title = command
    if len(title) > 100:
        errors["title"] = "Ensure this field has no more than 100 characters."
    if not content.strip():
        errors["content"] = "Write the prompt's text."
    elif len(content) > settings.MAX_MESSAGE_CHARS:
        errors["content"] = f"A prompt is at most {settings.MAX_MESSAGE_CHARS:,} characters, as a message is."
    if errors:
        raise ValidationError(errors)
    return {"command": command, "title": title, "content": content}


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
