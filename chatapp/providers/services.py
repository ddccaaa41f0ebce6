"""Writes for model configs (issue 11: a key stays bound to its endpoint): create, update, make
default, delete; keys encrypted at rest and write-only.

Errors are django.core.exceptions.ValidationError keyed by field name, in plain words; views and the
API turn them into form and field errors.
"""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.http import Http404

import optimizer
from chatapp.chat.textsafe import text_blank
from chatapp.providers.models import LLMConfig

from .api_keys import api_key_clean
from .crypto import SecretDecryptError, secret_encrypt, secret_rotate
from .llm.types import OFFLINE_MODEL
from .model_moves import chats_moved, default_model
from .netguard import base_url_validate
from .ollama import assumed_window

DEFAULT_CONTEXT_WINDOW = 8192
MAX_CONTEXT_WINDOW = 10_000_000
_FULL_ENDPOINT = re.compile(r"/chat/completions/*$", re.IGNORECASE)
# Below this length, showing the last four characters would give away too much of the key.
LAST4_MIN_KEY_CHARS = 12


def _lock_owner(owner: User) -> None:
    """Serialize one user's config writes (first-config default, default swaps, unique names).

    PostgreSQL takes a row lock on the user; SQLite's IMMEDIATE transactions already serialize writers.
    """
    list(get_user_model().objects.select_for_update().filter(pk=owner.pk).values_list("pk", flat=True))


def _int_field(value: Any, *, field: str, label: str, errors: dict[str, list[str]], maximum: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            if isinstance(value, bool) or value is None or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            value = int(value)
        except (TypeError, ValueError):
            errors.setdefault(field, []).append(f"{label} must be a whole number.")
            return None
    if value < 1:
        errors.setdefault(field, []).append(f"{label} must be a positive number.")
        return None
    if value > maximum:
        errors.setdefault(field, []).append(f"{label} must be at most {maximum:,}.")
        return None
    return value


def text_field_clean(value: Any, *, field: str, label: str, max_length: int, errors: dict[str, list[str]]) -> str:
    text = " ".join(str(value or "").split())
    if text_blank(text):  # white space, or only characters that do not show (a zero-width space pasted)
        errors.setdefault(field, []).append(f"{label} is required.")
    elif len(text) > max_length:
        errors.setdefault(field, []).append(f"{label} must be at most {max_length} characters.")
    return text


def model_window_lookup(*, model: str, base_url: str = "") -> tuple[int, str]:
    """The context window for a model name at an endpoint (whose host may say the registry's provider
    prefix) and where it comes from ("registry" or "default")."""
    provider = optimizer.provider_for_base_url(base_url)
    info = optimizer.model_info(model.strip(), provider=provider) if model and model.strip() else None
    if info is not None and info.context_window:
        return info.context_window, LLMConfig.WindowSource.REGISTRY.value
    return assumed_window(base_url, default=DEFAULT_CONTEXT_WINDOW), LLMConfig.WindowSource.DEFAULT.value


KEY_LEFT_BEHIND = (
    "The base URL now points at another server, so the stored API key was cleared: "
    "enter the key for the new server (leave it empty if it needs none)."
)


def llm_config_key_left_behind(*, config: LLMConfig, fields: dict[str, Any]) -> bool:
    """Whether an update moves the config to another server (scheme, host or port) while a key is
    stored and no new one is given: the key is then cleared, never sent to the new host (whoever
    controls it would receive it, and a write-only key cannot be checked by its owner)."""
    if not config.api_key_encrypted or fields.get("clear_api_key"):
        return False
    try:
        if api_key_clean(fields.get("api_key")):
            return False
    except ValidationError:
        return False  # a key that cannot be sent: the update itself refuses it, as a field error

    base_url = fields.get("base_url")
    return base_url is not None and _origin(str(base_url).strip()) != _origin(config.base_url)


def _origin(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port: where a request (and its Authorization header) goes. The scheme's own
    port written out is the same place (https://host:443 is https://host), as browsers have it."""
    try:
        parts = urlsplit(url)
    except ValueError:  # "https://[zz]/v1": an edit's URL is read before it is validated (then refused)
        return "", "", None
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port


def _api_key_store(config: LLMConfig, key: str) -> None:
    config.api_key_encrypted = secret_encrypt(key)
    config.api_key_last4 = key[-4:] if len(key) >= LAST4_MIN_KEY_CHARS else ""


def _base_url_clean(base_url: Any, *, errors: dict[str, list[str]]) -> str:
    url = str(base_url or "").strip().rstrip("/")
    # The endpoint pasted whole, as providers' docs show it: the client adds that path itself, and
    # every request went to …/chat/completions/chat/completions (a 404, "does not know the model").
    url = _FULL_ENDPOINT.sub("", url)
    if not url:
        errors.setdefault("base_url", []).append("Base URL is required, e.g. https://api.openai.com/v1.")
    elif len(url) > 500:
        errors.setdefault("base_url", []).append("Base URL must be at most 500 characters.")
    elif "?" in url.partition("#")[0]:
        # The client adds each request's path (/chat/completions) at the end, inside the query then.
        errors.setdefault("base_url", []).append(
            "Base URL must have no query (the part from “?”), e.g. https://api.openai.com/v1."
        )
    else:
        try:
            base_url_validate(url, allow_private=settings.ALLOW_PRIVATE_LLM_URLS)
        except ValidationError as exc:
            # A host not resolving yet (a Compose service not up) is saved, the caller saying so
            # (netguard.base_url_unresolved): each connection is checked where it resolves (llm/addresses.py).
            if exc.code != "dns":
                errors.setdefault("base_url", []).extend(exc.messages)
    return url


def _config_clean(
    *,
    name: Any,
    base_url: Any,
    model: Any,
    context_window: Any,
    max_output_tokens: Any,
    temperature: Any,
    window_source: str,
) -> dict[str, Any]:
    """Validated field values; raises ValidationError with every problem found, keyed by field."""
    errors: dict[str, list[str]] = {}
    name = text_field_clean(name, field="name", label="Name", max_length=100, errors=errors)
    model = text_field_clean(model, field="model", label="Model", max_length=200, errors=errors)
    url = _base_url_clean(base_url, errors=errors)
    max_output = _int_field(
        max_output_tokens, field="max_output_tokens", label="Max output tokens", errors=errors,
        maximum=MAX_CONTEXT_WINDOW,
    )
    window = _int_field(
        context_window, field="context_window", label="Context window", errors=errors, maximum=MAX_CONTEXT_WINDOW
    )
    if window is not None and max_output is not None and window <= max_output:
        if window_source == LLMConfig.WindowSource.DEFAULT:
            # Not the model's window: the one assumed for a model the registry does not know.
            errors.setdefault("max_output_tokens", []).append(
                f"Max output tokens ({max_output:,}) must be smaller than the model's context window, which the "
                f"model registry does not know: {window:,} tokens is assumed. Enter the model's context window."
            )
        elif window_source == LLMConfig.WindowSource.REGISTRY:
            errors.setdefault("max_output_tokens", []).append(
                f"Max output tokens ({max_output:,}) must be smaller than the model's context window ({window:,})."
            )
        else:
            errors.setdefault("context_window", []).append(
                f"The context window ({window:,}) must be larger than max output tokens ({max_output:,})."
            )

    temp: float | None = None
    if isinstance(temperature, bool) or not isinstance(temperature, int | float | str):
        errors.setdefault("temperature", []).append("Temperature must be a number from 0 to 2.")
    else:
        try:
            temp = float(temperature)
        except ValueError:
            temp = None
        if temp is None or not math.isfinite(temp) or not 0 <= temp <= 2:
            errors.setdefault("temperature", []).append("Temperature must be a number from 0 to 2.")
    if errors:
        raise ValidationError(errors)
    return {
        "name": name,
        "base_url": url,
        "model": model,
        "context_window": window,
        "max_output_tokens": max_output,
        "temperature": temp,
    }


def _name_taken(*, owner_id: int, name: str, exclude_pk: int | None) -> bool:
    configs = LLMConfig.objects.filter(owner_id=owner_id, name=name)
    if exclude_pk is not None:
        configs = configs.exclude(pk=exclude_pk)
    return configs.exists()


def _save_config(config: LLMConfig, *, update_fields: list[str] | None = None) -> None:
    config.full_clean(exclude=["owner", "base_url"], validate_unique=False, validate_constraints=False)
    try:
        with transaction.atomic():
            config.save(update_fields=update_fields)
    except IntegrityError:
        # The owner lock makes this a lost race on the unique name at most.
        raise ValidationError({"name": ["You already have a configuration with this name."]}) from None


def llm_config_create(
    *,
    owner: User,
    name: str,
    base_url: str,
    model: str,
    api_key: str = "",
    context_window: int | None = None,
    max_output_tokens: int = 2000,
    temperature: float = 0.7,
    is_default: bool = False,
    accepts_images: bool | None = None,
) -> LLMConfig:
    """Add a config. No window given: the registry's for a known model, else 8192 (4096 at an Ollama
    server). A user's first config becomes the default."""
    if context_window is None:
        window, source = model_window_lookup(model=str(model or ""), base_url=str(base_url or ""))
    else:
        window, source = context_window, LLMConfig.WindowSource.USER.value
    # Validation resolves DNS: done before the transaction so no lock is held meanwhile.
    cleaned = _config_clean(
        name=name, base_url=base_url, model=model, context_window=window, max_output_tokens=max_output_tokens,
        temperature=temperature, window_source=source,
    )
    key = api_key_clean(api_key)
    with transaction.atomic():
        _lock_owner(owner)
        if _name_taken(owner_id=owner.pk, name=cleaned["name"], exclude_pk=None):
            raise ValidationError({"name": ["You already have a configuration with this name."]})
        make_default = bool(is_default) or not LLMConfig.objects.filter(owner=owner).exists()
        if make_default:
            chats_moved(owner_id=owner.pk, config_ids=(), followers=True, before=default_model(owner_id=owner.pk),
                         after=cleaned["model"])
            LLMConfig.objects.filter(owner=owner, is_default=True).update(is_default=False)
        config = LLMConfig(owner=owner, context_window_source=source, is_default=make_default,
                           accepts_images=accepts_images, **cleaned)
        _api_key_store(config, key)
        _save_config(config)
    return config


_UPDATABLE = frozenset({"name", "base_url", "model", "api_key", "clear_api_key", "context_window",
                        "max_output_tokens", "temperature", "is_default", "accepts_images"})


def llm_config_update(*, config: LLMConfig, **fields: Any) -> LLMConfig:
    """Change the given fields.

    - `api_key`: a non-empty value replaces the key; "" or None keeps it (the key is write-only, so
      forms send nothing when it is unchanged). `clear_api_key=True` removes it; a new key with it replaces it.
    - `context_window`: a number is the user's override; None returns to the automatic value. A
      number equal to the current automatic value is not an override (a form re-submitting what it
      was shown), and the automatic value follows a change of model or of the endpoint's host.
    - `is_default=True` makes it the default; a default cannot be unset directly (make another one
      the default instead).
    """
    unknown = set(fields) - _UPDATABLE
    if unknown:
        raise TypeError(f"llm_config_update() got unexpected fields: {', '.join(sorted(unknown))}")

    model, base_url = fields.get("model", config.model), str(fields.get("base_url", config.base_url) or "")
    # The automatic window follows the model and the endpoint's host (whose registry entries it reads).
    model_changed = " ".join(str(model or "").split()) != config.model or _origin(base_url) != _origin(config.base_url)
    is_auto = config.context_window_source != LLMConfig.WindowSource.USER
    if "context_window" in fields and fields["context_window"] is not None:
        requested = fields["context_window"]
        if is_auto and requested == config.context_window:
            window, source = (model_window_lookup(model=str(model or ""), base_url=base_url) if model_changed
                              else (config.context_window, config.context_window_source))
        else:
            window, source = requested, LLMConfig.WindowSource.USER.value
    elif "context_window" in fields or (model_changed and is_auto):
        window, source = model_window_lookup(model=str(model or ""), base_url=base_url)
    else:
        window, source = config.context_window, config.context_window_source

    cleaned = _config_clean(
        name=fields.get("name", config.name),
        base_url=base_url,
        model=model,
        context_window=window,
        max_output_tokens=fields.get("max_output_tokens", config.max_output_tokens),
        temperature=fields.get("temperature", config.temperature),
        window_source=source,
    )
    new_key = api_key_clean(fields.get("api_key"))
    drop_key = llm_config_key_left_behind(config=config, fields=fields)
    if "is_default" in fields and not fields["is_default"] and config.is_default:
        raise ValidationError(
            {"is_default": ["One configuration is always the default: make another one the default instead."]}
        )

    with transaction.atomic():
        _lock_owner(config.owner)
        # Read again under the lock: `config` may predate a "make default" (or a delete) made since,
        # and only the fields this edit changes are written, so it cannot undo what the other did.
        current = LLMConfig.objects.filter(pk=config.pk).values_list("is_default", flat=True).first()
        if current is None:
            raise Http404("No such configuration.")
        config.is_default = current
        if _name_taken(owner_id=config.owner_id, name=cleaned["name"], exclude_pk=config.pk):
            raise ValidationError({"name": ["You already have a configuration with this name."]})
        chats_moved(owner_id=config.owner_id, config_ids=(config.pk,), followers=config.is_default,
                     before=config.model, after=cleaned["model"])
        for attr, value in cleaned.items():
            setattr(config, attr, value)
        config.context_window_source = source
        written = [*cleaned, "context_window_source", "updated_at"]
        if "accepts_images" in fields:  # None: back to the registry's word
            config.accepts_images, written = fields["accepts_images"], [*written, "accepts_images"]
        if fields.get("clear_api_key") or drop_key or new_key:
            _api_key_store(config, new_key)  # a new key given with clear_api_key is the key wanted
            written += ["api_key_encrypted", "api_key_last4"]
        _save_config(config, update_fields=written)
        if fields.get("is_default") and not config.is_default:
            config = llm_config_make_default(config=config)
    return config


def llm_config_make_default(*, config: LLMConfig) -> LLMConfig:
    with transaction.atomic():
        _lock_owner(config.owner)
        # Read again under the lock: a config deleted meanwhile (another tab) took the default off the
        # one that had it and then set none, and the caller's 500 left the user with no default at all.
        current = LLMConfig.objects.filter(pk=config.pk).values_list("is_default", flat=True).first()
        if current is None:
            raise Http404("No such configuration.")
        if not current:
            chats_moved(owner_id=config.owner_id, config_ids=(), followers=True,
                         before=default_model(owner_id=config.owner_id), after=config.model)
        # Unset first: the database allows one default per owner at any moment.
        mine = LLMConfig.objects.filter(owner_id=config.owner_id)
        mine.filter(is_default=True).exclude(pk=config.pk).update(is_default=False)
        LLMConfig.objects.filter(pk=config.pk).update(is_default=True)
    config.refresh_from_db()
    return config


def llm_config_delete(*, config: LLMConfig) -> LLMConfig | None:
    """Delete a config; when it was the default, the first remaining one (by name) takes over and is
    returned (None otherwise), so the caller can say so. Conversations that used it fall back to the
    default."""
    with transaction.atomic():
        _lock_owner(config.owner)
        was_default = LLMConfig.objects.filter(pk=config.pk, is_default=True).exists()
        owner_id = config.owner_id
        successor = (LLMConfig.objects.filter(owner_id=owner_id).exclude(pk=config.pk).order_by("name", "id").first()
                     if was_default else None)
        # Its chats follow the default from now on; when it was the default, so do the chats on no config.
        chats_moved(owner_id=owner_id, config_ids=(config.pk,), followers=was_default, before=config.model,
                     after=(successor.model if successor is not None else OFFLINE_MODEL) if was_default
                     else default_model(owner_id=owner_id))
        config.delete()
        if successor is not None:
            LLMConfig.objects.filter(pk=successor.pk).update(is_default=True)
        return successor


def llm_config_keys_rotate() -> tuple[int, int]:
    """Re-encrypt every stored API key under the first FIELD_ENCRYPTION_KEY, so the others can be
    removed; (keys rotated, keys no configured key reads: left as they are, their owners re-enter them)."""
    rotated = unreadable = 0
    stored = LLMConfig.objects.exclude(api_key_encrypted="").values_list("pk", "api_key_encrypted")
    for pk, token in stored.iterator():
        try:
            new_token = secret_rotate(token)
        except SecretDecryptError:
            unreadable += 1
            continue
        # Only if the key is still the one read: one saved meanwhile is under the first key already.
        rotated += LLMConfig.objects.filter(pk=pk, api_key_encrypted=token).update(api_key_encrypted=new_token)
    return rotated, unreadable
