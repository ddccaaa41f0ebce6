"""Model facts (context window, output limit, prices) from litellm's bundled registry.

The litellm wheel ships ``model_prices_and_context_window_backup.json``, a maintained table of
thousands of models. We read it as a plain JSON file located with ``importlib.util.find_spec``:
importing litellm itself costs seconds and pulls in half of PyPI, which neither the request path
nor the CLI can afford. The file is parsed once per process, on first use.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

REGISTRY_FILE = "model_prices_and_context_window_backup.json"
_FIELDS = ("max_input_tokens", "max_tokens", "max_output_tokens", "input_cost_per_token", "output_cost_per_token",
           "cache_read_input_token_cost", "litellm_provider", "supports_vision")


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the registry says about one model. Costs are USD per token."""

    key: str  # the registry entry that matched
    context_window: int
    max_output_tokens: int | None
    input_cost_per_token: float | None
    output_cost_per_token: float | None
    cached_input_cost_per_token: float | None
    provider: str | None = None
    supports_vision: bool | None = None  # whether it takes images; None: the registry does not say


@lru_cache(maxsize=1)
def _registry() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = os.path.join(next(iter(spec.submodule_search_locations)), REGISTRY_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    data.pop("sample_spec", None)
    # keep only the fields we read: the whole table is megabytes of objects a process would carry for life
    return {
        k.lower(): (k, {f: v[f] for f in _FIELDS if f in v}) for k, v in data.items() if isinstance(v, dict)
    }


# OpenRouter names a model "<vendor>/<model>". litellm's table has no openrouter/ entries, but Vercel's
# AI Gateway, which it does have, uses the same ids for the same models at the vendor's list prices:
# looked up there, exactly, after every other spelling, so a vendor's own entry still comes first.
_GATEWAY = "vercel_ai_gateway/"
# OpenRouter's spellings of a vendor that the gateway (and litellm) spell otherwise.
_VENDOR_ALIASES = {"x-ai": "xai", "mistralai": "mistral"}
# OpenRouter's free variant ("deepseek/deepseek-r1:free"): the same model, not billed. Its other
# variants (":nitro", ":floor", ":extended") change the price or the window, so they stay unknown.
_FREE_VARIANT = ":free"


# An endpoint's host -> litellm's prefix for the models it serves under unprefixed names: Mistral's API
# calls "mistral/mistral-large-latest" "mistral-large-latest". That host's own entry (its window, its
# prices) comes first; the name alone does not say the host (Azure lists the same name, priced apart).
_HOST_PROVIDERS = {
    "api.mistral.ai": "mistral",
    "api.together.xyz": "together_ai",
    "api.together.ai": "together_ai",
    "api.groq.com": "groq",
    "generativelanguage.googleapis.com": "gemini",
    "api.deepseek.com": "deepseek",
    "api.x.ai": "xai",
    "api.fireworks.ai": "fireworks_ai",
    "api.deepinfra.com": "deepinfra",
    "api.perplexity.ai": "perplexity",
    "api.cerebras.ai": "cerebras",
}


def provider_for_base_url(base_url: str) -> str | None:
    """litellm's provider prefix for the models of an endpoint (its base URL), when its host is known."""
    try:
        host = urlsplit(base_url.strip()).hostname
    except ValueError:
        return None
    return _HOST_PROVIDERS.get(host or "")


def _gateway_candidates(names: list[str]) -> list[str]:
    out = []
    for name in names:
        vendor, slash, rest = name.partition("/")
        if slash and rest and "/" not in rest:
            out.append(f"{_GATEWAY}{_VENDOR_ALIASES.get(vendor, vendor)}/{rest}")
    return out


def _candidates(model: str) -> list[str]:
    name = model.strip().lower()
    out = [name]
    # "openai/gpt-4o" -> "gpt-4o"; "openrouter/meta-llama/x" -> "meta-llama/x" -> "x"
    rest = name
    while "/" in rest:
        rest = rest.split("/", 1)[1]
        out.append(rest)
    # An OpenAI fine-tune, "ft:<base>:<organization>:<suffix>:<job>" (the suffix may be empty), is listed
    # as "ft:<base>": the rule litellm itself applies (utils._strip_openai_finetune_model_name).
    out += [f"ft:{parts[1]}" for parts in (c.split(":") for c in list(out)) if parts[0] == "ft" and len(parts) >= 5]
    out += [f"{_VENDOR_ALIASES[vendor]}/{rest}" for vendor, slash, rest in (c.partition("/") for c in list(out))
            if slash and vendor in _VENDOR_ALIASES]
    return out + _gateway_candidates(out)


def _as_int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def _as_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


@lru_cache(maxsize=512)
def model_info(model: str, *, provider: str | None = None) -> ModelInfo | None:
    """Registry facts for `model` (the `provider`'s entry of that name first, when given
    (provider_for_base_url); then the exact name, then without provider prefixes), or None if unknown."""
    info = _lookup(model, provider)
    if info is None and model.strip().lower().endswith(_FREE_VARIANT):
        base = _lookup(model.strip()[: -len(_FREE_VARIANT)], provider)
        if base is not None:
            return replace(base, input_cost_per_token=0.0, output_cost_per_token=0.0, cached_input_cost_per_token=0.0)
    return info


def _lookup(model: str, provider: str | None) -> ModelInfo | None:
    table = _registry()
    own = [f"{provider}/{model.strip().lower()}"] if provider else []
    for cand in own + _candidates(model):
        hit = table.get(cand)
        if hit is None:
            continue
        key, entry = hit
        window = _as_int(entry.get("max_input_tokens")) or _as_int(entry.get("max_tokens"))
        if window is None:
            continue
        return ModelInfo(
            key=key,
            context_window=window,
            max_output_tokens=_as_int(entry.get("max_output_tokens")),
            input_cost_per_token=_as_float(entry.get("input_cost_per_token")),
            output_cost_per_token=_as_float(entry.get("output_cost_per_token")),
            cached_input_cost_per_token=_as_float(entry.get("cache_read_input_token_cost")),
            provider=entry.get("litellm_provider"),
            supports_vision=entry["supports_vision"] if isinstance(entry.get("supports_vision"), bool) else None,
        )
    return None


def cost_usd(
    model: str, *, prompt_tokens: int, completion_tokens: int = 0, cached_tokens: int = 0, provider: str | None = None
) -> float | None:
    """Price of one call in USD, or None when the model or its prices are unknown.

    `cached_tokens` is the part of `prompt_tokens` served from the provider's prompt cache (OpenAI's
    usage convention); it is billed at the cached-input price when the registry has one. `provider`:
    as for model_info, the prefix the endpoint's host names (its own entry first).
    """
    info = model_info(model, provider=provider)
    if info is None or info.input_cost_per_token is None or info.output_cost_per_token is None:
        return None
    cached = max(0, min(cached_tokens, prompt_tokens))
    cached_price = info.cached_input_cost_per_token
    if cached_price is None:
        cached_price = info.input_cost_per_token
    return (
        (prompt_tokens - cached) * info.input_cost_per_token
        + cached * cached_price
        + completion_tokens * info.output_cost_per_token
    )
