"""dashboard.0003: a totals row made by the release before counts its refused requests (both costs
stored as zero, tokens sent), so a chat whose only request was refused claims no loss after the upgrade."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.management import call_command

from chatapp.chat.models import Conversation, OptimizationRecord
from chatapp.dashboard.models import DashboardTotals
from tests.support.migrations import migrated_back

BEFORE = ("dashboard", "0002_totals_last_prompt_hash")
AFTER = ("dashboard", "0003_totals_refused_turns")


@pytest.mark.django_db(transaction=True)
def test_a_totals_row_counts_its_refused_requests(user):
    with migrated_back(BEFORE) as old:
        Totals = old.get_model("dashboard", "DashboardTotals")

        def record(conversation, cost: str | None, sent: int = 40):
            money = None if cost is None else Decimal(cost)
            OptimizationRecord.objects.create(conversation=conversation, preference="balanced", model="gpt-4o-mini",
                                              context_window=8192, budget=7000, strategy="none", tokens_full=sent,
                                              tokens_sent=sent, cost_full_usd=money, cost_sent_usd=money)

        expected = {}
        for title, costs, refused in [
            ("one refused", ["0.000100", "0"], 1),
            ("unpriced", [None, None], 0),
            ("nothing sent", [("0", 0)], 0),  # an empty request, not a refusal
            ("a few tokens", [("0", 3)], 0),  # billed at $0.00000045, stored as 0
        ]:
            conversation = Conversation.objects.create(owner_id=user.pk, title=title)
            for cost in costs:
                cost, sent = cost if isinstance(cost, tuple) else (cost, 40)
                record(conversation, cost, sent)
            Totals.objects.create(conversation_id=conversation.pk, turns=len(costs))
            expected[conversation.pk] = refused

        call_command("migrate", *AFTER, verbosity=0)

    assert dict(DashboardTotals.objects.filter(conversation_id__in=expected)
                .values_list("conversation_id", "refused_turns")) == expected
