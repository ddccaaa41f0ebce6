"""Packing strategies behind one interface (`Strategy`: a `name` and `apply(state)`), a module each.

`pack` runs them in the order of `PLAN`, assembles the context, then runs `AFTER_ASSEMBLY` on it.
"""

from .base import PackState, Strategy, SummarizeNow
from .recall import RecallStrategy
from .summarize import PassedSummaryStrategy, SummarizeStrategy, SummaryAfterRecallStrategy
from .truncate import TruncateStrategy

PASSED_SUMMARY = PassedSummaryStrategy()
TRUNCATE = TruncateStrategy()
SUMMARIZE = SummarizeStrategy()
RECALL = RecallStrategy()
SUMMARY_AFTER_RECALL = SummaryAfterRecallStrategy()
# order matters: the summary's place bounds the window; summarizing may move the window for its room
PLAN: tuple[Strategy, ...] = (PASSED_SUMMARY, TRUNCATE, SUMMARIZE)
# after assembly: quotes around what is sent, then (when the window yielded to them) the summary
AFTER_ASSEMBLY: tuple[Strategy, ...] = (RECALL, SUMMARY_AFTER_RECALL)

__all__ = [
    "AFTER_ASSEMBLY",
    "PASSED_SUMMARY",
    "PLAN",
    "RECALL",
    "SUMMARIZE",
    "SUMMARY_AFTER_RECALL",
    "TRUNCATE",
    "PackState",
    "PassedSummaryStrategy",
    "RecallStrategy",
    "Strategy",
    "SummarizeNow",
    "SummarizeStrategy",
    "SummaryAfterRecallStrategy",
    "TruncateStrategy",
]
