"""A web server stopped (SIGTERM: a deploy, a restart) while replies stream: each reply is stored as
interrupted with the text it had, and its chat's claim is given back, when the process exits. Before,
the reply stayed "streaming" and the chat refused sends until the orphan sweep, a minute or two later.

A uvicorn process of its own (the exit hook runs at the interpreter's exit), on the test database.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from chatapp.chat.models import Conversation, Message
from chatapp.chat.reply_stream import INTERRUPTED_WORDS
from tests.support.accounts import api_key_for
from tests.support.chat import make_config, sse_events
from tests.support.worker import ROOT, _database_url

pytestmark = pytest.mark.django_db(transaction=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def _uvicorn(tmp_path: Path, *, grace: int) -> Iterator[tuple[subprocess.Popen, str, Path]]:
    """uvicorn as serve runs it (lifespan on), with `grace` seconds for replies at SIGTERM."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update({
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
        "DATABASE_URL": _database_url(),
        "CHATAPP_VAR_DIR": str(tmp_path / "var"),
        "SECRET_KEY": settings.SECRET_KEY,
        "FIELD_ENCRYPTION_KEY": ",".join(settings.FIELD_ENCRYPTION_KEYS),
        "ALLOW_PRIVATE_LLM_URLS": "1",
        "SEND_RATE_LIMIT_PER_MINUTE": "1000",
        "SHUTDOWN_GRACE_SECONDS": str(grace),
    })
    log_path = tmp_path / "uvicorn.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "chatapp.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--lifespan", "on", "--timeout-graceful-shutdown", str(grace), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log_path.read_text()[-2000:]
            try:
                httpx.get(f"{url}/accounts/login/", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "uvicorn did not start"
                time.sleep(0.1)
        yield proc, url, log_path
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


@pytest.fixture
def server(tmp_path: Path):
    with _uvicorn(tmp_path, grace=1) as running:
        yield running


def _chat(fake_openai, model: str) -> tuple[Conversation, str]:
    user = get_user_model().objects.create_user(username=f"deployer-{model}", password="a long test password 9")
    config = make_config(user, fake_openai.base_url, model=model)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    return conversation, api_key_for(user)


@pytest.mark.parametrize("client_stays", [True, False], ids=["client-connected", "client-left"])
def test_a_reply_streaming_when_the_server_stops_is_stored_interrupted(server, fake_openai, client_stays):
    proc, url, log = server
    conversation, key = _chat(fake_openai, "slow-300")
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {key}"}, timeout=30) as client, \
            client.stream("POST", f"/api/conversations/{conversation.pk}/messages/",
                          json={"content": "a long answer, please"}) as response:
        events = sse_events(response)
        for name, data in events:
            if name == "start":
                reply_id = data["assistant_message"]["id"]
            if name == "delta":
                break
        if not client_stays:
            response.close()  # a reload: the reply is read on without its client
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)

    reply = Message.objects.get(pk=reply_id)
    assert (reply.status, reply.error) == ("error", INTERRUPTED_WORDS), log.read_text()[-3000:]
    assert reply.content.startswith("Echo:")  # what had arrived is kept
    conversation.refresh_from_db()
    assert conversation.turn_claimed_at is None  # the chat takes a send at once


def test_a_reply_whose_page_left_gets_the_grace_period_too(tmp_path, fake_openai):
    """uvicorn waits for open connections only: a reply whose page was reloaded (read on without its
    client) was cut at once, though it would have ended well within the grace period."""
    conversation, key = _chat(fake_openai, "slow-100")
    with _uvicorn(tmp_path, grace=8) as (proc, url, log), \
            httpx.Client(base_url=url, headers={"Authorization": f"Token {key}"}, timeout=30) as client:
        with client.stream("POST", f"/api/conversations/{conversation.pk}/messages/",
                           json={"content": "a long answer, please"}) as response:
            for name, data in sse_events(response):
                if name == "start":
                    reply_id = data["assistant_message"]["id"]
                if name == "delta":
                    break  # a reload: the reply is read on without its client
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=40)
    reply = Message.objects.get(pk=reply_id)
    assert (reply.status, reply.error) == ("complete", ""), log.read_text()[-3000:]
