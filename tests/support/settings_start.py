"""A Python process that loads the settings (and runs `code` after), for the tests of what they
refuse or read from the environment: each start is a fresh import, as a server's is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_LOAD = "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'chatapp.settings'; import django; django.setup()"
# The test run's own servers and keys: a start sees only what its test gives it.
_SERVER_VARS = {"DATABASE_URL", "REDIS_URL", "CACHE_URL", "SECRET_KEY", "FIELD_ENCRYPTION_KEY"}


def settings_start(var_dir: Path, code: str = SETTINGS_LOAD, **env: str) -> subprocess.CompletedProcess:
    """Run `code` (by default only the settings' load) with var/ at `var_dir` and `env` set."""
    environ = {k: v for k, v in os.environ.items() if k not in _SERVER_VARS}
    environ.update({"CHATAPP_VAR_DIR": str(var_dir), **env})
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True,
                          timeout=60, check=False)
