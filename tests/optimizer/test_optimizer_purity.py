"""The optimizer core is pure Python: importing and using it pulls in no Django, Celery or litellm."""

import os
import subprocess
import sys

import optimizer

CODE = """
import sys
import optimizer
optimizer.count_text("hello", model="gpt-4o")
optimizer.model_info("gpt-4o-mini")
optimizer.pack([optimizer.Msg(id="1", role="user", content="hi")], budget=100)
print(",".join(sorted(m for m in ("django", "celery", "litellm") if m in sys.modules)) or "clean")
"""


def test_import_pulls_in_no_framework():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, check=True,
                          cwd=os.path.dirname(os.path.dirname(optimizer.__file__)))
    assert proc.stdout.strip() == "clean"


def test_exports_the_contract():
    for name in ("count_message", "count_text", "count_messages", "is_estimated", "model_info", "cost_usd",
                 "compute_budget", "select_strategy", "pack", "build_summary_prompt", "summary_header",
                 "extractive_summary", "get_optimization_recommendation", "check_context_safety",
                 "optimize_chat_context", "Msg", "Summary", "HistoryTotals", "Counters", "PackConfig",
                 "PackedMessage", "SummarySpan", "PackResult", "Decision", "ContextTooLargeError"):
        assert name in optimizer.__all__ and hasattr(optimizer, name)
