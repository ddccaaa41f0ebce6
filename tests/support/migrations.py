"""Moving the test database between migration states (the data-keeping migration tests)."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate_to(targets: list[tuple[str, str | None]]) -> Any:
    """Migrate to `targets` ((app, None): none of that app's migrations); returns the historical apps
    of the state reached."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


def latest() -> list[tuple[str, str]]:
    """Every app's newest migration: where a test must leave the database."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()
