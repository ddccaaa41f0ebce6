"""Context optimizer: decides, for every model request, which messages of a conversation the model sees.

Pure Python (no Django, no Celery, no litellm import). Public API per the team contract; see the
modules' docstrings for the design: `tokens` (exact offline counting), `registry` (model windows and
prices), `budget` (budget/trigger/target), `selector` (truncate vs summarize), `layout` (the static
layer / window / newest message rule), `packing` (`pack`, an orchestration of `strategies`: summary,
truncate, summarize, recall), `summaries` (header, prompt builder, extractive summarizer), `lexical`
and `recall` (query analysis, BM25, the recall block), `safety` (recommendation helpers).
"""

from .budget import budget_for_model, compute_budget, target_tokens, trigger_tokens
from .layout import is_static, message_place
from .packing import pack
from .registry import ModelInfo, cost_usd, model_info, provider_for_base_url
from .safety import check_context_safety, get_optimization_recommendation, optimize_chat_context
from .selector import PREFERENCES, select_strategy
from .summaries import SummaryPrompt, build_summary_prompt, extractive_summary, summary_body, summary_header
from .tokens import count_content, count_message, count_messages, count_text, is_estimated
from .truncation import compress_text, omitted_marker
from .types import (
    ContextTooLargeError,
    Counters,
    Decision,
    HistoryTotals,
    Msg,
    PackConfig,
    PackedMessage,
    PackResult,
    PackStats,
    Summary,
    SummarySpan,
)

__all__ = [
    "PREFERENCES",
    "ContextTooLargeError",
    "Counters",
    "Decision",
    "HistoryTotals",
    "ModelInfo",
    "Msg",
    "PackConfig",
    "PackResult",
    "PackStats",
    "PackedMessage",
    "Summary",
    "SummaryPrompt",
    "SummarySpan",
    "budget_for_model",
    "build_summary_prompt",
    "check_context_safety",
    "compress_text",
    "compute_budget",
    "cost_usd",
    "count_content",
    "count_message",
    "count_messages",
    "count_text",
    "extractive_summary",
    "get_optimization_recommendation",
    "is_estimated",
    "is_static",
    "message_place",
    "model_info",
    "omitted_marker",
    "optimize_chat_context",
    "pack",
    "provider_for_base_url",
    "select_strategy",
    "summary_body",
    "summary_header",
    "target_tokens",
    "trigger_tokens",
]
