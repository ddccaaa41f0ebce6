"""The dashboard's tables moved from the `chat` app to `dashboard` (issue 10): a database made by the
release before the move migrates forward with every row kept, and back."""

from __future__ import annotations

import pytest

from tests.support.migrations import (
    assert_content_type_moved,
    content_types_before_move,
    latest,
    migrate_to,
    migrated_to,
)

BEFORE = [("chat", "0013_turn_claim"), ("dashboard", None)]
TOTALS_FIELDS = ("conversation_id", "turns", "tokens_full", "tokens_sent", "summary_ids", "ledger_through_id")
BLOCK_FIELDS = ("conversation_id", "number", "turns", "first_record_id", "last_record_id", "tokens_sent_sum")




@pytest.mark.django_db(transaction=True)
def test_the_dashboard_tables_move_to_their_app_with_every_row():
    with migrated_to(BEFORE) as apps:
        User = apps.get_model("auth", "User")
        Conversation = apps.get_model("chat", "Conversation")
        Totals = apps.get_model("chat", "DashboardTotals")
        Block = apps.get_model("chat", "DashboardTurnBlock")
        content_types_before_move(app="dashboard", model="dashboardtotals")
        owner = User.objects.create(username="before-the-move")
        chats = [Conversation.objects.create(owner=owner, title=f"chat {i}") for i in range(3)]
        for i, chat in enumerate(chats):
            Totals.objects.create(conversation=chat, turns=17 + i, tokens_full=9000 + i, tokens_sent=4000 + i,
                                  summary_ids=[i, i + 1], ledger_through_id=100 + i)
            for number in range(2):
                Block.objects.create(conversation=chat, number=number, turns=16, first_record_id=number * 16 + 1,
                                     last_record_id=number * 16 + 16, tokens_sent_sum=1000 * (number + 1))
        totals = sorted(Totals.objects.values_list(*TOTALS_FIELDS))
        blocks = sorted(Block.objects.values_list(*BLOCK_FIELDS))

        apps = migrate_to(latest())
        moved_totals = apps.get_model("dashboard", "DashboardTotals")
        moved_blocks = apps.get_model("dashboard", "DashboardTurnBlock")
        assert sorted(moved_totals.objects.values_list(*TOTALS_FIELDS)) == totals
        assert sorted(moved_blocks.objects.values_list(*BLOCK_FIELDS)) == blocks
        assert_content_type_moved(app="dashboard", model="dashboardtotals")

        # And back: the release before the move reads the same rows.
        apps = migrate_to(BEFORE)
        assert sorted(apps.get_model("chat", "DashboardTotals").objects.values_list(*TOTALS_FIELDS)) == totals

    # The app's own models (what the services use) read the moved rows.
    from chatapp.dashboard.models import DashboardTotals

    assert sorted(DashboardTotals.objects.values_list(*TOTALS_FIELDS)) == totals
