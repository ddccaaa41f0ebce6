"""A database taken back to an earlier migration, for the tests of a data migration."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


@contextmanager
def migrated_back(target: tuple[str, str]) -> Iterator[Any]:
    """Migrate to `target` and yield its historical apps (`apps.get_model`) for writing rows as that
    release did; the body then migrates forward to what it tests. The database is brought to the
    latest migration afterwards, also when the body fails, for the tests after."""
    call_command("migrate", *target, verbosity=0)
    try:
        yield MigrationExecutor(connection).loader.project_state(target).apps
    finally:
        call_command("migrate", verbosity=0)
