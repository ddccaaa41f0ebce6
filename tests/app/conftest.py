"""Fixtures for the app-layer tests (settings, checks, CSP, selectors, topology)."""

from __future__ import annotations

from tests.support.accounts import other_user, user

__all__ = ["other_user", "user"]  # the shared accounts
