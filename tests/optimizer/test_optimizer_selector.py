"""Strategy selector: the documented outcomes and the scoring."""

import pytest

from optimizer import select_strategy


def decide(count, chars, pref, summaries=0, truncations=0, available=True):
    return select_strategy(message_count=count, char_count=chars, preference=pref, summaries_so_far=summaries,
                           truncations_so_far=truncations, summarizer_available=available)


@pytest.mark.parametrize(
    ("count", "chars", "pref", "choice"),
    [
        (5, 800, "fast", "truncate"),
        (5, 800, "balanced", "truncate"),
        (5, 800, "quality", "truncate"),  # the literal formula says summarize: see the selector's docstring
        (30, 6_000, "fast", "truncate"),
        (30, 6_000, "balanced", "truncate"),  # 50 vs 50: a tie goes to truncation
        (30, 6_000, "quality", "summarize"),
        (60, 40_000, "fast", "truncate"),
        (60, 40_000, "balanced", "summarize"),
        (60, 40_000, "quality", "summarize"),
    ],
)
def test_documented_outcomes(count, chars, pref, choice):
    assert decide(count, chars, pref).choice == choice


def test_scores_raw_and_weighted():
    d = decide(62, 14_200, "quality", summaries=1)
    assert (d.truncate_score, d.summarize_score) == (40, 100)
    assert (d.weighted_truncate, d.weighted_summarize) == (8, 80)
    assert d.as_dict() == {"truncate": 40, "summarize": 100, "weighted_truncate": 8, "weighted_summarize": 80}
    assert d.reason.startswith("quality preference; 62 messages, 14,200 characters; 1 summary so far")


def test_many_summaries_penalised_and_truncations_counted():
    assert decide(60, 40_000, "balanced", summaries=3).summarize_score == 20 + 30 + 30 - 50
    assert decide(20, 5_000, "fast", truncations=5).truncate_score == 20 + 30 + 30


def test_no_summarizer_means_truncate():
    d = decide(60, 40_000, "quality", available=False)
    assert d.choice == "truncate"
    assert "no summarizer" in d.reason


def test_bad_preference():
    with pytest.raises(ValueError, match="unknown preference"):
        decide(10, 100, "turbo")
