"""API tokens (Settings, `/api/auth/token/`). Registered through models.py, which imports this module.

Only a digest of each key is stored. A key is 160 random bits, so a plain SHA-256 is enough: no salt or
slow hash is needed against guessing, and a copy of the database no longer holds working credentials
(DRF's Token, used before, stored the key itself). The key is shown once, when it is created.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models

HINT_CHARS = 6


def key_digest(key: str) -> str:
    """What is stored of a key, and looked up by: its hex SHA-256."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """One of a user's API tokens. A user may hold several (one per script or machine), so that asking for
    a new one, which can no longer hand back a stored key, does not cut off the others."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    # key_digest(key)
    digest = models.CharField(max_length=64)
    # The key's first HINT_CHARS characters, which Settings shows to tell the tokens apart (24 of its 160 bits).
    hint = models.CharField(max_length=8)
    class MadeIn(models.TextChoices):
        SETTINGS = "settings", "Settings"
        API = "api", "API sign-in"

    name = models.CharField(max_length=80)
    # Where it was made: past the most a user may hold, a sign-in by the API replaces only a token
    # made the same way (a script signing in on every run must not revoke what the user made in Settings).
    made_in = models.CharField(max_length=8, choices=MadeIn.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # Settings' list of a user's tokens, newest first; creating one counts them and finds the oldest.
            models.Index(fields=["user", "-created_at"], name="apitoken_user_created_idx"),
        ]
        constraints = [
            # Every API request: the token by its key's digest, one unique-index seek.
            models.UniqueConstraint(fields=["digest"], name="apitoken_digest_uniq"),
            models.CheckConstraint(condition=models.Q(made_in__in=["settings", "api"]), name="apitoken_made_in_valid"),
        ]

    def __str__(self) -> str:
        return f"API token {self.hint}… of user {self.user_id}"
