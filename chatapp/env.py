"""Typed reads of environment variables for settings: a bad value raises ImproperlyConfigured naming
the variable, so start-up stops with a message instead of a later failure; a variable set but empty
(or only white space) is read as unset (a blank line in an env file, `FOO=` in a compose file)."""

from __future__ import annotations

import os
import re

from django.core.exceptions import ImproperlyConfigured


def env_bool(name: str, default: bool) -> bool:
    raw = (os.environ.get(name) or "").strip()  # set but blank: the default, as if unset
    if not raw:
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false/1/0), got {raw!r}")


def env_str(name: str, default: str) -> str:
    """A text variable, stripped; set but blank: the default, as if unset."""
    return (os.environ.get(name) or "").strip() or default


def env_list(name: str, default: str) -> list[str]:
    """A comma-separated list that must name something: `,` alone is refused, not read as none."""
    items = comma_list(env_str(name, default))
    if not items:
        raise ImproperlyConfigured(f"{name} must list at least one item (comma-separated), got {os.environ[name]!r}")
    return items


def env_rate(name: str, default: str) -> str:
    """A throttle rate such as "10/min" (per s, min, hour or day)."""
    value = env_str(name, default)
    if not re.fullmatch(r"[1-9]\d*/(s|sec|second|m|min|minute|h|hour|d|day)", value):
        raise ImproperlyConfigured(f"{name} must look like 10/min (per s, min, hour or day), got {value!r}")
    return value


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = (os.environ.get(name) or "").strip()  # set but blank: the default, as if unset
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def comma_list(text: str) -> list[str]:
    """A comma-separated variable's items, blanks dropped."""
    return [item.strip() for item in text.split(",") if item.strip()]
