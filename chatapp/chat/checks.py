"""System checks: setting combinations that are valid one by one but risky together, a database
migrated by a release too old to upgrade from directly, and a machine whose clock is off the
database's."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from chatapp.chat.dbclock import CLOCK_SYNC_HINT, clock_skew_measure, clock_skew_problem

# The last release with the migration history the squashes replace: a database it migrated is
# already in the squashes' state, so it is where an older database upgrades through.
SQUASHED_AT = "452c170"


@register()
def summary_lease_check(app_configs, **kwargs) -> list[Warning]:
    # The worker renews a job's lease before each model call; a call that can outlast the lease lets
    # the sweep hand the job to another worker mid-call, and the first worker's result is discarded.
    # A summary's call is bounded by its own timeout (summary_writing.model_summarize), not the chat's.
    if settings.SUMMARY_JOB_LEASE_SECONDS > settings.SUMMARY_TIMEOUT_SECONDS:
        return []
    return [
        Warning(
            f"SUMMARY_JOB_LEASE_SECONDS ({settings.SUMMARY_JOB_LEASE_SECONDS}) does not exceed "
            f"SUMMARY_TIMEOUT_SECONDS ({settings.SUMMARY_TIMEOUT_SECONDS}): a slow summary call can be taken "
            "over by another worker and its result discarded.",
            hint="Set SUMMARY_JOB_LEASE_SECONDS above SUMMARY_TIMEOUT_SECONDS.",
            id="chat.W001",
        )
    ]


@register(Tags.database)
def migration_history_check(app_configs, databases=None, **kwargs) -> list[Error]:
    # Squashed migrations whose old files are gone are applied to an existing database only by
    # recording them, which needs every old one recorded. A database part way through the old history
    # cannot get there: Django drops a partly applied squash from its plan and fails later, on a table
    # that already exists or a model it cannot resolve. Say so before `migrate` runs anything. The old
    # histories are taken together: the squashes depend on each other, as the old migrations did.
    errors: list[Error] = []
    for alias in databases or ():
        recorder = MigrationRecorder(connections[alias])
        if not recorder.has_table():
            continue
        applied = recorder.applied_migrations()
        loader = MigrationLoader(None, ignore_no_migrations=True)
        squashed_apps = {app for app, _ in loader.replacements}
        gone = [old for squash in loader.replacements.values() for old in squash.replaces
                if old not in loader.disk_migrations]
        missing = [f"{app}.{name}" for app, name in gone if (app, name) not in applied]
        # A database with none of these apps' migrations recorded is new: the squashes build it. Any
        # other that lacks one (part way through, or made before the history the squashes replace,
        # recorded under names no file has any more) would have tables the squashes try to make.
        if not missing or not any(app in squashed_apps for app, _ in applied):
            continue
        errors.append(
            Error(
                f"Database '{alias}' was migrated by a release older than commit {SQUASHED_AT}: it lacks "
                f"{len(missing)} migrations ({', '.join(missing)}) that this release no longer has.",
                hint=f"Upgrade to commit {SQUASHED_AT} first and run `manage.py migrate` there (its own check "
                "says if an older release must go through an earlier one), then to this release (README: Upgrading).",
                id="chat.E001",
            )
        )
    return errors


@register(Tags.database)
def clock_skew_check(app_configs, databases=None, **kwargs) -> list[Warning]:
    # Run by `manage.py check --database default` and before `migrate`: on several machines, each one's
    # (dbclock says why the clocks must agree).
    warnings: list[Warning] = []
    for alias in databases or ():
        problem = clock_skew_problem(clock_skew_measure(using=alias))
        if problem is not None:
            warnings.append(Warning(problem, hint=CLOCK_SYNC_HINT, id="chat.W002"))
    return warnings
