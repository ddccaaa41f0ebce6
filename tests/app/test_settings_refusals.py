"""Settings refuse, at start-up and naming the variable, values that would only fail later; the
instance's var/ directory is its owner's alone."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from chatapp.instance import instance_prepare
from tests.support.settings_start import ROOT, SETTINGS_LOAD, settings_start


@pytest.mark.parametrize(("name", "value", "words"), [
    # each started, then failed at the first use: a 500 on saving a model key, a signed-by-" " session,
    # "no such table" on every request (each process its own empty database), "install mysqlclient"
    ("FIELD_ENCRYPTION_KEY", ",", "FIELD_ENCRYPTION_KEY is set but holds no key"),
    ("SECRET_KEY", "   ", "SECRET_KEY is set but blank"),
    ("DATABASE_URL", "sqlite://", "in-memory SQLite"),
    ("DATABASE_URL", "mysql://u:p@db.internal/chat", "runs on PostgreSQL"),
    # the default SQLite file, secrets and broker folders found from each process's working directory
    ("CHATAPP_VAR_DIR", "var-here", "CHATAPP_VAR_DIR must be an absolute path"),
    # started, then answered every request 400 (DisallowedHost)
    ("ALLOWED_HOSTS", ",", "ALLOWED_HOSTS must list at least one item"),
])
def test_a_value_that_cannot_work_stops_start_up_naming_it(tmp_path, name, value, words):
    started = settings_start(tmp_path, **{name: value})
    assert started.returncode != 0
    assert "ImproperlyConfigured" in started.stderr and words in started.stderr


def test_the_defaultssettings_start(tmp_path):
    started = settings_start(tmp_path)
    assert started.returncode == 0, started.stderr[-2000:]


_HOSTS = SETTINGS_LOAD + (
    "; from django.conf import settings as s; print(s.ALLOWED_HOSTS, s.LOG_LEVEL, s.CELERY_IMPORT_QUEUE)"
)


def test_blank_values_start_with_the_defaults(tmp_path):
    """`NAME=` in an env or compose file is unset: ALLOWED_HOSTS= answered every request 400, and a blank
    throttle rate or log level stopped start-up."""
    blank = {"ALLOWED_HOSTS": "", "LOG_LEVEL": " ", "CELERY_IMPORT_QUEUE": "", "THROTTLE_COMPACT": ""}
    started = settings_start(tmp_path, _HOSTS, **blank)
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.strip() == "['localhost', '127.0.0.1', '[::1]'] INFO celery"


def test_var_is_the_owners_alone_and_an_older_one_is_closed(tmp_path, monkeypatch):
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("CHATAPP_VAR_DIR", str(fresh))
    instance_prepare()
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
    older = tmp_path / "older"
    older.mkdir(mode=0o755)
    older.chmod(0o755)  # as a release before this one left it: its SQLite file readable by every local user
    monkeypatch.setenv("CHATAPP_VAR_DIR", str(older))
    instance_prepare()
    assert stat.S_IMODE(older.stat().st_mode) == 0o700


def test_a_log_level_that_is_no_level_is_named(tmp_path):
    started = settings_start(tmp_path, LOG_LEVEL="LOUD")  # "Unable to configure root logger", no variable named
    assert started.returncode != 0 and "LOG_LEVEL must be" in started.stderr


def test_serve_names_a_port_that_is_no_port(tmp_path):
    environ = {**os.environ, "CHATAPP_VAR_DIR": str(tmp_path), "PORT": "abc"}
    environ.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "manage.py", "serve", "--no-worker"], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0 and "PORT must be a port number" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "chatapp.sqlite3").exists()  # nothing started


def test_serve_reads_a_blank_host_or_port_as_unset(monkeypatch):
    """`HOST=` bound every interface (uvicorn's --host ""), and `PORT=` stopped start-up."""
    from chatapp.chat.management.commands.serve import Command, _env_port

    monkeypatch.setenv("HOST", "")
    monkeypatch.setenv("PORT", " ")
    options = Command().create_parser("manage.py", "serve").parse_args([])
    assert (options.host, _env_port()) == ("127.0.0.1", 8000)


_ENQUEUE = ("from chatapp.instance import instance_prepare; instance_prepare(); " + SETTINGS_LOAD
            + "; from chatapp.celery import app; app.send_task('chat.nothing', queue='summaries'); print('queued')")


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_redis_url_is_unset_for_the_embedded_brokers_folders_too(tmp_path, blank):
    """`REDIS_URL= ` (a space left after it in an env file) chose the embedded broker, as blank means
    unset, but its folders were not made: every summary, title and import failed to enqueue."""
    environ = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "SECRET_KEY", "FIELD_ENCRYPTION_KEY"}}
    environ.update({"CHATAPP_VAR_DIR": str(tmp_path), "REDIS_URL": blank})
    done = subprocess.run([sys.executable, "-c", _ENQUEUE], cwd=ROOT, env=environ, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "queued"


def test_serve_refuses_a_port_number_past_65535(tmp_path):
    """`serve --port 70000` ended in a traceback (OverflowError from the port probe)."""
    environ = {**os.environ, "CHATAPP_VAR_DIR": str(tmp_path)}
    environ.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "manage.py", "serve", "--no-worker", "--port", "70000"], cwd=ROOT,
                          env=environ, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0 and "--port must be a port number (1-65535), got '70000'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "chatapp.sqlite3").exists()  # nothing started


@pytest.mark.parametrize("var", ["a-file", "a-file/var", "relative/var"])
def test_manage_on_a_var_dir_it_cannot_make_says_so(tmp_path, var):
    """A file where var/ goes, or a path under one, ended every command in a traceback; a relative path
    was made in the working directory before the settings refused it."""
    (tmp_path / "a-file").write_text("")
    environ = {**os.environ, "CHATAPP_VAR_DIR": var if var.startswith("relative") else str(tmp_path / var)}
    done = subprocess.run([sys.executable, str(ROOT / "manage.py"), "check"], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "CHATAPP_VAR_DIR" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "relative").exists()
