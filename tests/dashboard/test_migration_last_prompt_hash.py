"""dashboard.0002: a totals row made by the release before takes its newest counted record's prompts'
fingerprint, which a turn's end now compares with instead of reading the two newest records."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from chatapp.chat.models import Conversation, OptimizationRecord
from chatapp.dashboard.models import DashboardTotals
from tests.support.migrations import migrated_back

BEFORE = ("dashboard", "0001_squashed_0001")
AFTER = ("dashboard", "0002_totals_last_prompt_hash")


@pytest.mark.django_db(transaction=True)
def test_a_totals_row_takes_its_newest_counted_records_fingerprint(user):
    with migrated_back(BEFORE) as old:
        # Only the dashboard's migrations went back: the chat's tables are today's.
        Totals = old.get_model("dashboard", "DashboardTotals")

        def record(conversation, stats):
            return OptimizationRecord.objects.create(conversation=conversation, preference="balanced", model="gpt-4o",
                                                     context_window=8192, budget=7000, strategy="none", tokens_full=40,
                                                     tokens_sent=40, stats=stats)

        expected = {}
        for title, older, newest, fingerprint in [
            ("changed prompts", {"system_prompt_hash": "aaaa"}, {"system_prompt_hash": "bbbb"}, "bbbb"),
            ("no prompts", {"system_prompt_hash": "cccc"}, {"system_prompt_hash": ""}, ""),
            ("before prompts existed", {}, {}, ""),
        ]:
            conversation = Conversation.objects.create(owner_id=user.pk, title=title)
            record(conversation, older)
            last = record(conversation, newest)
            Totals.objects.create(conversation_id=conversation.pk, turns=2, last_record_id=last.pk)
            expected[conversation.pk] = fingerprint
        never_counted = Conversation.objects.create(owner_id=user.pk, title="no records")
        Totals.objects.create(conversation_id=never_counted.pk)
        expected[never_counted.pk] = ""

        call_command("migrate", *AFTER, verbosity=0)

    assert dict(DashboardTotals.objects.filter(conversation_id__in=expected)
                .values_list("conversation_id", "last_prompt_hash")) == expected
