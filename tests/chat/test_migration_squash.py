"""The migration history squashed into one migration per app (issue 10): a database the release at
commit 452c170 made upgrades running none of the squashes' operations and keeps every row; one from an
older release (part way through that history, or from before the history the squashes replace) is
stopped before `migrate` touches it; a fresh one has what the models say, search index included."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from chatapp.chat.checks import SQUASHED_AT
from chatapp.chat.models import Conversation, Message, OptimizationRecord, UserSettings
from chatapp.chat.search_models import MessageSearch
from chatapp.dashboard.models import DashboardTotals, DashboardTurnBlock
from chatapp.providers.models import LLMConfig

APPS = ("chat", "dashboard", "providers")
# What the release at 452c170 recorded: the squashes must replace exactly these, or its databases
# would run a squash over tables they already have (or keep a migration no file provides).
RELEASE_HISTORY = {
    ("providers", "0001_squashed_0001"), ("providers", "0002_config_accepts_images"),
    ("dashboard", "0001_squashed_0001"), ("dashboard", "0002_totals_last_prompt_hash"),
    ("dashboard", "0003_totals_refused_turns"),
} | {
    ("chat", name) for name in (
        "0001_squashed_0016", "0002_recall_scoped_fts", "0003_search_hidden_branches", "0004_offline_reply_totals",
        "0005_conversation_token_counts_mixed", "0006_record_sent_orjson", "0007_summaryjob_quota_idx",
        "0008_search_folded_terms", "0009_search_marked_words", "0010_search_character_pairs",
        "0011_search_run_last_character", "0012_stopped_replies_live", "0013_summary_skipped_pins",
        "0014_import_fingerprints", "0015_search_fold_stroked_letters", "0016_api_tokens_and_titles",
        "0017_reply_reasoning", "0018_reply_finish_reason", "0019_conversation_pinned",
        "0020_conversation_archived", "0021_saved_prompts", "0022_share_hidden_ids",
        "0023_optimizationrecord_registry_provider", "0024_importjob_branch", "0025_share_token_digests",
        "0026_folders", "0027_account_deletion", "0028_message_images", "0029_search_modifier_apostrophe",
    )
}
# What a database of a release before f89204b recorded (the history the previous squashes replaced):
# none of RELEASE_HISTORY, so it is no new database either.
OLDER_HISTORY = {("providers", "0001_initial"), ("dashboard", "0001_initial"), ("chat", "0001_initial"),
                 ("chat", "0002_message_search"), ("chat", "0016_llmconfig_moves_to_providers")}
MODELS = (get_user_model(), LLMConfig, UserSettings, Conversation, Message, MessageSearch, OptimizationRecord,
          DashboardTotals, DashboardTurnBlock)


def squashes() -> dict[tuple[str, str], list[tuple[str, str]]]:
    return {key: list(m.replaces) for key, m in MigrationLoader(None).replacements.items() if key[0] in APPS}


def recorded() -> set[tuple[str, str]]:
    return {key for key in MigrationRecorder(connection).applied_migrations() if key[0] in APPS}


@contextmanager
def history(names: set[tuple[str, str]]) -> Iterator[None]:
    """django_migrations as if the database had been migrated through `names` (the schema is the
    same: the squashes build what the old chain did). Put back afterwards, for the tests after."""
    recorder = MigrationRecorder(connection)
    before = recorded()
    recorder.migration_qs.filter(app__in=APPS).delete()
    for app, name in sorted(names):
        recorder.record_applied(app, name)
    try:
        yield
    finally:
        recorder.migration_qs.filter(app__in=APPS).delete()
        for app, name in sorted(before):
            recorder.record_applied(app, name)


def schema() -> list[tuple]:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")
            return sorted(cursor.fetchall())
        cursor.execute(
            "SELECT table_name, column_name, data_type, is_nullable, generation_expression "
            "FROM information_schema.columns WHERE table_schema = 'public'"
        )
        rows = cursor.fetchall()
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")
        rows += cursor.fetchall()
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE connamespace = 'public'::regnamespace"
        )
        return sorted(map(tuple, rows + cursor.fetchall()))


def every_row() -> dict[str, list[dict]]:
    return {model.__name__: list(model.objects.order_by("pk").values()) for model in MODELS}


def release_data() -> None:
    """A row in each app's main tables, linked as the app links them."""
    owner = get_user_model().objects.create_user(username="from-452c170", password="a long test password 1")
    config = LLMConfig.objects.create(owner=owner, name="main", base_url="https://llm.example/v1", model="gpt-4o",
                                      api_key_encrypted="token", context_window=128_000, is_default=True)
    UserSettings.objects.create(user=owner, summary_config=config, custom_instructions="Be brief.")
    chat = Conversation.objects.create(owner=owner, llm_config=config, title="kept", live_message_count=2,
                                       title_requested=True)
    question = Message.objects.create(conversation=chat, role="user", content="which bike for gravel?")
    answer = Message.objects.create(conversation=chat, role="assistant", content="a gravel bike", parent=question,
                                    reply_to=question)
    MessageSearch.objects.create(message=question, conversation=chat, scope=f"_c{chat.pk} _u{owner.pk}",
                                 terms="bike gravel", length=3, recallable=True)
    record = OptimizationRecord.objects.create(conversation=chat, reply=answer, preference="balanced", model="gpt-4o",
                                               context_window=128_000, budget=120_000, strategy="none",
                                               tokens_full=40, tokens_sent=40, cost_sent_usd=Decimal("0.000120"))
    DashboardTotals.objects.create(conversation=chat, turns=1, tokens_full=40, tokens_sent=40, last_record_id=record.pk,
                                   summary_ids=[])
    DashboardTurnBlock.objects.create(conversation=chat, number=0, turns=1, first_record_id=record.pk,
                                      last_record_id=record.pk, tokens_sent_sum=40)


def test_the_squashes_replace_exactly_the_release_history():
    replaced = [name for names in squashes().values() for name in names]
    assert sorted(replaced) == sorted(RELEASE_HISTORY)  # each once, none missing, none extra


@pytest.mark.django_db(transaction=True)
def test_a_database_of_the_release_runs_only_what_came_after_it_and_keeps_every_row():
    release_data()
    rows, tables = every_row(), schema()
    now = recorded()
    later = now - RELEASE_HISTORY - set(squashes())  # the migrations written after the squash
    with history(now):
        # The release's schema: what came after it undone in every app (each later migration has a
        # working reverse; one of providers' own, such as 0002, depends on no later chat migration).
        for app, squash in sorted(squashes()):
            call_command("migrate", app, squash, verbosity=0)
        with history(RELEASE_HISTORY):
            executor = MigrationExecutor(connection)
            planned = {(m.app_label, m.name) for m, _ in executor.migration_plan(executor.loader.graph.leaf_nodes())}
            assert planned == later  # nothing of the squashes runs

            call_command("migrate", verbosity=0, skip_checks=False)

            assert schema() == tables
            assert every_row() == rows
            # The squashes are recorded beside the old names: later migrations depend on them.
            assert recorded() == RELEASE_HISTORY | set(squashes()) | later


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("older", [
    pytest.param(set(sorted(RELEASE_HISTORY)[:9]), id="part-way-through-the-squashed-history"),
    pytest.param(OLDER_HISTORY, id="before-the-squashed-history"),
])
def test_a_database_of_an_older_release_is_stopped_before_anything_runs(older):
    tables = schema()
    with history(older):
        with pytest.raises(SystemCheckError, match=SQUASHED_AT):
            call_command("migrate", verbosity=0, skip_checks=False)
        assert recorded() == older
    assert schema() == tables


# The vendor part of the search index, which only the migration's raw SQL makes (the models cannot).
SEARCH_INDEX_SQL = {
    "sqlite": "SELECT name FROM sqlite_master WHERE tbl_name IN ('chat_message_fts', 'chat_messagesearch')",
    "postgresql": "SELECT indexname FROM pg_indexes WHERE tablename = 'chat_messagesearch'",
}
SEARCH_INDEX = {
    "sqlite": {"chat_message_fts"} | {f"chat_messagesearch_fts_{event}" for event in ("ai", "ad", "au")},
    "postgresql": {"chat_messagesearch_tsv_idx", "chat_messagesearch_rtsv_idx"},
}


@pytest.mark.django_db
def test_a_fresh_database_has_every_model_and_the_search_index():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)  # exits 1 on a missing migration
    with connection.cursor() as cursor:
        cursor.execute(SEARCH_INDEX_SQL[connection.vendor])
        assert SEARCH_INDEX[connection.vendor] <= {row[0] for row in cursor.fetchall()}
