"""The provider's cached prompt tokens: stored on the record, and preferred by the dashboard's
prompt-cache cost figure over the estimate from the stable prefix."""

from __future__ import annotations

import pytest

import optimizer
from chatapp.dashboard.series import dashboard_series
from tests.dashboard.factories import make_conversation, make_record

pytestmark = pytest.mark.django_db


def test_dashboard_cache_figure_uses_the_providers_count_when_reported(user):
    c = make_conversation(owner=user)
    make_record(conversation=c, tokens_full=2000, tokens_sent=2000)  # no report: estimated (nothing before)
    make_record(conversation=c, tokens_full=2500, tokens_sent=2500, provider_cached_tokens=1024)
    make_record(conversation=c, tokens_full=3000, tokens_sent=3000)  # no report: estimate, prefix 2,500
    make_record(conversation=c, tokens_full=3500, tokens_sent=3500, provider_cached_tokens=0)  # a miss
    est = dashboard_series(conversation=c)["prompt_cache_estimate"]

    # The estimate alone would have been 2,000 + 2,500 + 3,000 cached tokens.
    assert est["cached_tokens"] == 1024 + 2500
    assert est["provider_reported_turns"] == 2
    mini = optimizer.model_info("gpt-4o-mini")
    full = (2000 + 2500 + 3000 + 3500) * mini.input_cost_per_token
    saving = (1024 + 2500) * (mini.input_cost_per_token - mini.cached_input_cost_per_token)
    assert est["sent_usd"] == pytest.approx(full)
    assert est["sent_usd_with_cache"] == pytest.approx(full - saving)
