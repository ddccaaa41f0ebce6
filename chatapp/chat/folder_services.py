"""Writes of chat folders (folder_models): make, rename and delete one, and put a chat in one or in
none. Each refusal is a ValidationError on its field with a `code` ("blank", "too_long", "taken",
"too_many"): the API and the sidebar say its words beside the name."""

from __future__ import annotations

import unicodedata
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.http import Http404

from .folder_models import FOLDER_NAME_MAX_CHARS, Folder
from .models import Conversation
from .textsafe import text_storable

# Separators, controls and format characters (U+200B, U+2060, U+FEFF, U+202E…): nothing a name shows.
_UNSEEN = {"Zs", "Zl", "Zp", "Cc", "Cf"}

# The sidebar lists every folder whole: bounded, as saved prompts are.
MAX_FOLDERS_PER_USER = 100


def _missing() -> Http404:
    return Http404("No Folder matches the given query.")


def _not_a_folder() -> ValidationError:
    # The folder a chat is moved into is a value of its request, not the address it went to: another
    # user's, or one deleted meanwhile, is a bad `folder` (a 400, as a missing one), not a 404.
    return ValidationError({"folder": ValidationError("No such folder.", code="missing")})


def _refused(message: str, *, code: str) -> ValidationError:
    return ValidationError({"name": ValidationError(message, code=code)})


def _name_clean(name: Any) -> str:
    # White space as one: a name is shown on one line, and "Work  notes" would clash unseen with "Work notes".
    # Composed: "é" pasted as "e" and a combining accent (macOS) is the "é" typed, and is stored as it.
    text = unicodedata.normalize("NFC", " ".join(text_storable(str(name or "")).split()))
    # Nothing visible (zero-width spaces, joiners, direction marks, pasted along): a folder without a name.
    if all(unicodedata.category(ch) in _UNSEEN for ch in text):
        raise _refused("Name the folder.", code="blank")
    if len(text) > FOLDER_NAME_MAX_CHARS:
        raise _refused(f"A folder's name is at most {FOLDER_NAME_MAX_CHARS} characters.", code="too_long")
    return text


def _name_key(name: str) -> str:
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def _clash(*, owner_id: int, name: str, pk: int | None = None) -> Folder | None:
    """The owner's folder (other than `pk`) whose name reads as `name`: in any case by Unicode's full
    folding ("STRASSE" is "Straße"), written composed or not. Compared here, not by the database: both
    compare code points (a decomposed "é" is not "é") and PostgreSQL's UPPER() keeps "ß", so such pairs
    were two folders that look one. Bounded: an owner has at most MAX_FOLDERS_PER_USER."""
    key = _name_key(name)
    return next((f for f in Folder.objects.filter(owner_id=owner_id) if f.pk != pk and _name_key(f.name) == key), None)


def _saved(folder: Folder, *, fields: list[str] | None = None) -> Folder:
    """Write the folder; a name another folder of the owner's has (in any case) is refused, whatever the
    race: the unique constraint decides (in the cases the database folds), the look-up before it words
    the common case and decides the others."""
    clash = _clash(owner_id=folder.owner_id, name=folder.name, pk=folder.pk)
    # Named as the sidebar shows it: "Travel" when "TRAVEL" was typed, which would read as no clash.
    taken = _refused(f"You already have a folder “{clash.name if clash else folder.name}”.", code="taken")
    if clash is not None:
        raise taken
    try:
        with transaction.atomic():
            if fields is None:
                folder.save()
            # An update, not save(update_fields): a folder deleted in another tab since the request read
            # it is the 404 of any folder not there (save raised a DatabaseError, a 500).
            elif not Folder.objects.filter(pk=folder.pk).update(**{f: getattr(folder, f) for f in fields}):
                raise _missing()
    except IntegrityError:
        raise taken from None
    return folder


def folder_create(*, owner: User, name: str) -> Folder:
    cleaned = _name_clean(name)
    if Folder.objects.filter(owner=owner).count() >= MAX_FOLDERS_PER_USER:
        raise _refused(
            f"You have {MAX_FOLDERS_PER_USER} folders, the most there can be: delete one first.", code="too_many"
        )
    return _saved(Folder(owner=owner, name=cleaned))


def folder_for_import(*, owner: User, name: str) -> Folder | None:
    """The owner's folder named `name` whatever the case, made if missing, for a chat an import brings
    in (our export names its folder); None for a name no folder can have, or when the owner has the
    most folders there can be: the chat comes in unfiled rather than not at all."""
    try:
        cleaned = _name_clean(name)
    except ValidationError:
        return None
    for _ in range(2):  # a folder of that name made meanwhile (another import) is found the second time
        found = _clash(owner_id=owner.pk, name=cleaned)
        if found is not None:
            return found
        try:
            return folder_create(owner=owner, name=cleaned)
        except ValidationError as exc:
            if exc.error_dict["name"][0].code != "taken":
                return None
    return None


def folder_rename(*, folder: Folder, name: str) -> Folder:
    """Another name, unique among the owner's folders (its own in another case is allowed)."""
    folder.name = _name_clean(name)
    return _saved(folder, fields=["name"])


def folder_delete(*, folder: Folder) -> None:
    """Delete the folder, never its chats: they are back in the main list (the column set null), each
    in its place by last activity (one UPDATE, updated_at left alone)."""
    with transaction.atomic():
        # Its row locked first (PostgreSQL), as a move into it does: a chat moved in meanwhile is then
        # seen by the UPDATE that takes the folder's chats out, not left pointing at a deleted row.
        if Folder.objects.select_for_update().filter(pk=folder.pk).values_list("pk", flat=True):
            folder.delete()


def conversation_folder_set(*, conversation: Conversation, folder: Folder | None) -> Conversation:
    """Put the chat in `folder` (one of its owner's), or in none. Not activity: updated_at stays, as for
    a pin. ValidationError on `folder` for another user's folder (it does not exist for this chat's
    owner) and for one deleted since it was read; Http404 for a chat deleted since."""
    if folder is not None and folder.owner_id != conversation.owner_id:
        raise _not_a_folder()
    with transaction.atomic():
        # The folder's row first, locked (PostgreSQL): deleted in another tab since the request read it,
        # the chat would point at nothing and fail the commit (a 500); it is a folder not there.
        if folder is not None and not Folder.objects.select_for_update().filter(pk=folder.pk).values_list(
            "pk", flat=True
        ):
            raise _not_a_folder()
        if not Conversation.objects.filter(pk=conversation.pk).update(folder=folder):
            raise Http404("No Conversation matches the given query.")
    conversation.folder = folder
    return conversation
