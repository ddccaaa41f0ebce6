"""Reads of saved prompts (prompt_models)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from .prompt_models import SavedPrompt


def prompt_list(*, owner: User) -> QuerySet[SavedPrompt]:
    """The owner's prompts by command (the unique constraint's index)."""
    return SavedPrompt.objects.filter(owner=owner).order_by("command")


def prompt_get(*, owner: User, pk: int) -> SavedPrompt:
    """One of the owner's prompts; 404 for anyone else's."""
    return get_object_or_404(SavedPrompt, owner=owner, pk=pk)
