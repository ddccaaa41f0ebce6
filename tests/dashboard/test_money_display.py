"""The money card's net, as displayed, is what its displayed parts give: a reader subtracting
"$18.18 saved - $0.2959 summarizing" must find the value the card shows."""

from __future__ import annotations

import inspect
import re
from decimal import Decimal

import pytest

from chatapp.dashboard.pages import MINUS, _cards


def _headline(gross: float | None, summary: float) -> dict:
    return {
        "turns": 1,
        "tokens": {"full": 0, "sent": 0, "saved": 0, "saved_share": 0.0, "dropped": 0, "summarized": 0,
                   "dropped_unmeasured": 0},
        "money": {"full_usd": gross or 0.0, "sent_usd": 0.0, "gross_saved_usd": gross, "summary_cost_usd": summary,
                  "net_saved_usd": None if gross is None else gross - summary, "unpriced_records": 0,
                  "refused_turns": 0, "prices": None},
        "summaries": {"made": 0, "extractive": 0, "discarded": 0, "jobs_failed": 0},
        "strategies": {"truncate": 0},
        "recall": {"turns": 0},
        "usage": None,
        "accuracy": None,
    }


def _amount(text: str) -> Decimal:
    sign = -1 if text.startswith(MINUS) else 1
    return sign * Decimal(text.lstrip(MINUS).lstrip("$").replace(",", ""))


@pytest.mark.parametrize(("gross", "summary"), [
    (18.1849, 0.2959),   # true net 17.889 → "$17.89", but 18.18 - 0.2959 = 17.8841 → "$17.88"
    (118.6, 0.51),       # "$119 saved - $0.5100": true net 118.09 → "$118"; parts give 118.49 → "$118"
    (1.004, 0.00004),
    (0.00004, 0.00001),  # parts "$0.0000 - $0.0000": the net cannot be a visible non-zero amount
    (2.345, 2.3449),
])
def test_the_displayed_net_follows_from_the_displayed_parts(gross, summary):
    card = next(c for c in _cards(_headline(gross, summary)) if c["key"] == "money")
    parts = re.match(rf"(\S+) saved {MINUS} (\S+) summarizing", card["detail"])
    assert parts, card["detail"]
    gross_shown, summary_shown = (_amount(p) for p in parts.groups())
    net_shown = _amount(card["value"]) if card["value"] != "$0" else Decimal(0)
    places = -net_shown.as_tuple().exponent if net_shown else 4
    expected = (gross_shown - summary_shown).quantize(Decimal(1).scaleb(-places))
    assert net_shown == expected, (card["value"], card["detail"])
    # the tone follows the net as shown: nothing "good" or "bad" about a net shown as $0
    assert (card["tone"] == "") == (net_shown == 0), card


def test_the_overview_card_follows_the_same_rule(monkeypatch, rf, user):

    overview = {
        "conversations": 1, "conversations_with_records": 1, "turns": 1, "optimized_turns": 1, "top": [],
        "tokens": {"full": 0, "sent": 0, "saved": 0, "saved_share": 0.0, "dropped": 0, "summarized": 0},
        "money": {"full_usd": 18.1849, "sent_usd": 0.0, "summary_cost_usd": 0.2959,
                  "net_saved_usd": 18.1849 - 0.2959, "unpriced_records": 0, "refused_turns": 0,
                  "summary_cost_other_usd": 0.0},
        "summaries": {"made": 1, "jobs": 1},
    }
    seen = _overview_page(monkeypatch, rf, user, overview)
    card = next(c for c in seen["cards"] if c["key"] == "money")
    assert (card["value"], card["detail"]) == ("$17.89", f"$18.1849 saved {MINUS} $0.2959 summarizing")
    # nothing priced: the gross saving is unknown, as the net, not "$0 saved"
    overview["money"].update(full_usd=0.0, net_saved_usd=None)
    seen = _overview_page(monkeypatch, rf, user, overview)
    card = next(c for c in seen["cards"] if c["key"] == "money")
    assert (card["value"], card["detail"]) == ("—", f"— saved {MINUS} $0.2959 summarizing")


def _overview_page(monkeypatch, rf, user, overview: dict) -> dict:
    """The context the overview page renders with, for `overview` as the selector's answer."""
    from chatapp.dashboard import pages

    seen: dict = {}
    monkeypatch.setattr(pages, "dashboard_overview", lambda **kw: overview)
    monkeypatch.setattr(pages, "render", lambda request, template, context: seen.update(context))
    request = rf.get("/")
    request.user = user
    inspect.unwrap(pages.dashboard_overview_page)(request)
    return seen


@pytest.mark.parametrize(("net", "label", "tone"), [
    (-0.000004, "$0", ""),          # summarizing cost a hair more than the saving: no minus $0.0000
    (0.00004, "$0", ""),
    (-0.0031, f"{MINUS}$0.0031", "bad"),  # a loss overall is toned as on a conversation's card
    (0.0031, "$0.0031", "good"),
])
def test_the_overview_shows_a_net_that_rounds_to_nothing_as_zero(monkeypatch, rf, user, net, label, tone):

    row = {"id": 1, "title": "Chat", "turns": 2, "optimized_turns": 1, "tokens_full": 100, "tokens_sent": 90,
           "tokens_saved": 10, "saved_share": 0.1, "net_saved_usd": net, "summary_cost_usd": 0.0}
    overview = {
        "conversations": 1, "conversations_with_records": 1, "turns": 2, "optimized_turns": 1, "top": [row],
        "tokens": {"full": 100, "sent": 90, "saved": 10, "saved_share": 0.1, "dropped": 10, "summarized": 0},
        "money": {"full_usd": 0.5 + net, "sent_usd": 0.5, "summary_cost_usd": 0.0, "net_saved_usd": net,
                  "unpriced_records": 0, "refused_turns": 0, "summary_cost_other_usd": 0.0},
        "summaries": {"made": 0, "jobs": 0},
    }
    seen = _overview_page(monkeypatch, rf, user, overview)
    card = next(c for c in seen["cards"] if c["key"] == "money")
    assert (seen["top"][0]["money_label"], card["value"], card["tone"]) == (label, label, tone)
