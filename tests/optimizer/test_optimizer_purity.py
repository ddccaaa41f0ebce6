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
print(",".join(sorted(m for m in ("django", "celery", "litellm", "chatapp") if m in sys.modules)) or "clean")
"""


def test_import_pulls_in_no_framework():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, check=True,
                          cwd=os.path.dirname(os.path.dirname(optimizer.__file__)))
    assert proc.stdout.strip() == "clean"


# importing __main__ runs the command line; the module it runs (optimizer.cli) is imported below
NOT_IMPORTABLE = {"optimizer.__main__"}

EVERY_MODULE = """
import importlib, pkgutil, sys
import optimizer
skip = set(sys.argv[1].split(","))
names = [m.name for m in pkgutil.walk_packages(optimizer.__path__, "optimizer.") if m.name not in skip]
for name in names:
    importlib.import_module(name)
print(len(names))
print(",".join(sorted(m for m in ("django", "celery", "litellm", "chatapp") if m in sys.modules)) or "clean")
"""


def test_every_module_imports_without_a_framework():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    skip = ",".join(sorted(NOT_IMPORTABLE))
    proc = subprocess.run([sys.executable, "-c", EVERY_MODULE, skip], capture_output=True, text=True, env=env,
                          check=True, cwd=os.path.dirname(os.path.dirname(optimizer.__file__)))
    count, loaded = proc.stdout.split()
    assert int(count) >= 18  # the walk really found the package's modules, subpackages included
    assert loaded == "clean"


def test_exports_the_contract():
    for name in ("count_message", "count_text", "count_messages", "is_estimated", "model_info", "cost_usd",
                 "compute_budget", "select_strategy", "pack", "build_summary_prompt", "summary_header",
                 "extractive_summary", "get_optimization_recommendation", "check_context_safety",
                 "optimize_chat_context", "Msg", "Summary", "HistoryTotals", "Counters", "PackConfig",
                 "PackedMessage", "SummarySpan", "PackResult", "PackStats", "Decision", "ContextTooLargeError",
                 "is_static", "message_place"):
        assert name in optimizer.__all__ and hasattr(optimizer, name)
