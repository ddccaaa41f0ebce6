"""Moving the test database between migration states (the data-keeping migration tests)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.contrib.contenttypes.models import ContentType
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


@contextmanager
def migrated_to(targets: list[tuple[str, str | None]]) -> Iterator[Any]:
    """The historical apps at `targets` for the body, which may migrate on; the database is back at
    latest() afterwards even when the body fails, since every later test expects it there."""
    try:
        yield migrate_to(targets)
    finally:
        migrate_to(latest())


def content_types_before_move(*, app: str, model: str) -> None:
    """The content types of a database made before `model` moved from `chat` to `app`: the test
    database already has the new app's (made at setup), which the move must make itself."""
    ContentType.objects.filter(app_label=app).delete()
    ContentType.objects.get_or_create(app_label="chat", model=model)


def assert_content_type_moved(*, app: str, model: str) -> None:
    assert ContentType.objects.filter(app_label=app, model=model).exists()
    assert not ContentType.objects.filter(app_label="chat", model=model).exists()
