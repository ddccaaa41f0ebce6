"""A Redis broker that accepts the connection and never answers (hung, or a black hole behind a proxy):
a publish gives up after CELERY_BROKER_SOCKET_TIMEOUT instead of waiting forever, and with it every
request queued behind it on the web process's one background thread (summary_requests)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A title's publish, as the web process's background thread makes it, against the broker REDIS_URL names.
_PUBLISH = (
    "import os, time; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'chatapp.settings');"
    "from chatapp.instance import instance_prepare; instance_prepare();"
    "import django; django.setup();"
    "from chatapp.chat.title_services import _title_publish;"
    "t = time.monotonic(); _title_publish(conversation_id=1, expected='x'); print(round(time.monotonic() - t, 1))"
)


def test_a_publish_to_a_broker_that_never_answers_gives_up(tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts (the kernel does), reads nothing, answers nothing
    port = silent.getsockname()[1]
    environ = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "CACHE_URL", "DATABASE_URL"}}
    environ.update(CHATAPP_VAR_DIR=str(tmp_path), REDIS_URL=f"redis://127.0.0.1:{port}/0",
                   CELERY_BROKER_SOCKET_TIMEOUT="2")
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", _PUBLISH], cwd=ROOT, env=environ, capture_output=True,
                              text=True, timeout=60, check=False)
    finally:
        silent.close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "not requested (broker unreachable" in done.stderr
    assert float(done.stdout.strip().splitlines()[-1]) < 15 and time.monotonic() - started < 60
