"""Packing strategies behind one interface (`Strategy`: a `name` and `apply(state)`), a module each.

`pack` runs them in the order of `PLAN`, assembles the context, then runs `RECALL` on it.
"""

from .base import PackState, Strategy, SummarizeNow
from .recall import RecallStrategy
from .summarize import PassedSummaryStrategy, SummarizeStrategy
from .truncate import TruncateStrategy

PASSED_SUMMARY = PassedSummaryStrategy()
TRUNCATE = TruncateStrategy()
SUMMARIZE = SummarizeStrategy()
RECALL = RecallStrategy()
# order matters: the summary's place bounds the window; summarizing may move the window for its room
PLAN: tuple[Strategy, ...] = (PASSED_SUMMARY, TRUNCATE, SUMMARIZE)

__all__ = [
    "PASSED_SUMMARY",
    "PLAN",
    "RECALL",
    "SUMMARIZE",
    "TRUNCATE",
    "PackState",
    "PassedSummaryStrategy",
    "RecallStrategy",
    "Strategy",
    "SummarizeNow",
    "SummarizeStrategy",
    "TruncateStrategy",
]
