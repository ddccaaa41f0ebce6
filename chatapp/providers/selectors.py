"""Reads of model configs. Scoped to their owner: another user's id answers Http404, like an id that
does not exist."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

import optimizer
from chatapp.providers.models import LLMConfig


def llm_config_list(*, owner: User) -> QuerySet[LLMConfig]:
    return LLMConfig.objects.filter(owner=owner).order_by("name", "id")


def llm_config_get(*, owner: User, pk: int) -> LLMConfig:
    return get_object_or_404(LLMConfig, owner=owner, pk=pk)


def llm_config_default(*, owner: User) -> LLMConfig | None:
    return LLMConfig.objects.filter(owner=owner, is_default=True).first()


def llm_config_get_or_none(*, owner: User, pk: int | None) -> LLMConfig | None:
    """For ids in request bodies, where someone else's id is a bad value rather than a missing page."""
    if pk is None:
        return None
    try:
        return llm_config_get(owner=owner, pk=pk)
    except Http404:
        return None


def llm_config_output_warning(*, config: LLMConfig) -> str | None:
    """Words for a max output the model registry says the model cannot write, else None. A warning,
    not a refusal: the registry may be out of date, and an endpoint (a proxy, a local server) may allow more."""
    info = optimizer.model_info(config.model, provider=optimizer.provider_for_base_url(config.base_url))
    limit = info.max_output_tokens if info is not None else None
    if limit is None or config.max_output_tokens <= limit:
        return None
    return (f"Note: Max output tokens ({config.max_output_tokens:,}) is more than the model registry says "
            f"“{config.model}” can write (at most {limit:,}): the endpoint may refuse every reply. Lower it, "
            "unless the registry is out of date.")
