"""This installation's own files: the var/ directory and the secrets kept in it.

Settings only read: the environment first (SECRET_KEY, FIELD_ENCRYPTION_KEY), else the files below.
What writes them is `instance_prepare`, which every process entry point calls before Django starts
(`manage.py`, so `manage.py serve` and every management command; the ASGI app; the Celery app) and
the test run's plugin (tests/support/instance.py). Importing the settings — a test, a type checker
with the Django plugin, a tool — creates nothing.

No Django import here: this runs before settings exist.
"""

from __future__ import annotations

import base64
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
# file names in var/, not secrets
SECRET_FILE = "secret_key"  # noqa: S105
ENCRYPTION_KEY_FILE = "field_encryption_key"
# The filesystem broker's folders (the embedded default when REDIS_URL is not set).
BROKER_FOLDERS = ("out", "processed", "control")


class InstanceError(Exception):
    """The var directory cannot be used; the message says why, for a command to print."""


def var_dir() -> Path:
    return Path(os.environ.get("CHATAPP_VAR_DIR") or BASE_DIR / "var")


def secret_read(name: str, filename: str) -> str:
    """The secret from the environment, else from var/ ("" when neither has it yet)."""
    raw = os.environ.get(name)
    if raw:
        return raw
    path = var_dir() / filename
    for _ in range(50):  # a process preparing the instance at the same moment may not have flushed yet
        try:
            value = path.read_text().strip()
        except FileNotFoundError:
            return ""
        if value:
            return value
        time.sleep(0.02)
    return ""


def _fernet_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def _secret_write(name: str, path: Path, factory: Callable[[], str]) -> None:
    if os.environ.get(name):
        return
    try:
        # O_EXCL: when the web server and the worker start together on a fresh machine, exactly one
        # of them writes the value and the other reads it (two different encryption keys would make
        # stored API keys unreadable). 0o600 from the start: the secret is never world-readable.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as handle:
        handle.write(factory())


def instance_prepare() -> Path:
    """Create var/ (database, broker folders, static root) and the secrets the environment does not
    give, each once: restarts keep sessions and stored keys readable. Safe to call from several
    processes at once. Returns the var directory."""
    var = var_dir()
    if not var.is_absolute():  # refused before it is made in this process's working directory
        raise InstanceError(f"CHATAPP_VAR_DIR must be an absolute path, got {str(var)!r}")
    try:
        _var_prepare(var)
    except OSError as exc:  # a file there, a read-only or missing parent: said, not a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        raise InstanceError(f"cannot make or write the var directory {var}: {exc.strerror or exc}{where}; "
                            "set CHATAPP_VAR_DIR to a writable folder") from None
    return var


def _var_prepare(var: Path) -> None:
    # The owner's alone: it holds the SQLite database (sessions, API tokens) and the secrets.
    var.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = var.stat()
    if found.st_mode & 0o077 and found.st_uid == os.getuid():
        var.chmod(found.st_mode & 0o700)  # one made by an earlier release, readable by every local user
    # Blank (white space alone) is unset, as the settings read it (chatapp.env): the embedded broker.
    if not (os.environ.get("REDIS_URL") or "").strip():
        for folder in BROKER_FOLDERS:
            (var / "celery-broker" / folder).mkdir(parents=True, exist_ok=True)
    # whitenoise warns on every start until collectstatic has run
    (var / "staticfiles").mkdir(exist_ok=True)
    _secret_write("SECRET_KEY", var / SECRET_FILE, lambda: secrets.token_urlsafe(50))
    _secret_write("FIELD_ENCRYPTION_KEY", var / ENCRYPTION_KEY_FILE, _fernet_key)
