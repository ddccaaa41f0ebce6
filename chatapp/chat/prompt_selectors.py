"""Reads of saved prompts (prompt_models)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import Count, Max, QuerySet
from django.shortcuts import get_object_or_404

from .prompt_models import SavedPrompt


def prompt_list(*, owner: User) -> QuerySet[SavedPrompt]:
    """The owner's prompts by command (the unique constraint's index)."""
    return SavedPrompt.objects.filter(owner=owner).order_by("command")


def prompt_list_version(*, owner: User) -> str:
    """What changes whenever the owner's list does: an edit moves the newest `updated_at`, an addition
    the highest id, a deletion the count. One aggregate over the owner's rows (a few hundred at most)."""
    found = SavedPrompt.objects.filter(owner=owner).aggregate(n=Count("id"), last=Max("id"), edited=Max("updated_at"))
    edited = found["edited"].isoformat() if found["edited"] is not None else "-"
    return f"{owner.pk}.{found['n']}.{found['last'] or 0}.{edited}"


def prompt_get(*, owner: User, pk: int) -> SavedPrompt:
    """One of the owner's prompts; 404 for anyone else's."""
    return get_object_or_404(SavedPrompt, owner=owner, pk=pk)


def prompt_export_items(*, owner: User) -> list[dict[str, str]]:
    """The owner's prompts as a file of prompts holds them (prompt_services.prompts_import reads it
    back): the command with its "/", as Open WebUI writes and reads its prompts' export, so one file
    moves between the two."""
    return [{"command": f"/{p.command}", "title": p.title, "content": p.content}
            for p in prompt_list(owner=owner).only("command", "title", "content")]
