"""chatapp.fs_broker, the embedded broker: every message a producer publishes reaches exactly one of
the consumers polling the folder while it is written (kombu's own filesystem transport loses some:
a consumer can take a file before its content is in it)."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kombu import Connection
from kombu.exceptions import ChannelError

from chatapp.fs_broker import TRANSPORT

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 1500
CONSUMERS = 2


def _options(folder: Path) -> dict:
    return {
        "data_folder_in": str(folder / "out"),
        "data_folder_out": str(folder / "out"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        "store_processed": False,
        "polling_interval": 0,  # consumers look as often as they can: the race is as likely as it gets
    }


def _consume(folder: Path, results, ready, done) -> None:
    """Take messages until the producer is done and the queue is empty; report their numbers and how
    many deliveries could not be read."""
    numbers, unreadable = [], 0
    with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue("stress")
        ready.release()
        while True:
            try:
                message = queue.get(block=True, timeout=0.2)
            except queue.Empty:
                if done.is_set():
                    break
                continue
            except ValueError:  # an empty or partial file does not decode
                unreadable += 1
                continue
            numbers.append(message.payload["n"])
            message.ack()
    results.put((numbers, unreadable))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for sub in ("out", "processed", "control"):
        (tmp_path / sub).mkdir()
    return tmp_path


def test_every_message_reaches_one_consumer_while_they_poll(folder):
    context = multiprocessing.get_context("spawn")  # no Django or open sockets inherited
    results, ready, done = context.Queue(), context.Semaphore(0), context.Event()
    consumers = [context.Process(target=_consume, args=(folder, results, ready, done)) for _ in range(CONSUMERS)]
    for process in consumers:
        process.start()
    for _ in consumers:  # publish while they poll, not before they start
        # A spawned interpreter imports kombu first: on a machine busy with other tests' browsers that
        # took over a minute once. The bound only says when to give up.
        assert ready.acquire(timeout=300)
    with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue("stress")
        for n in range(MESSAGES):
            queue.put({"n": n, "padding": "x" * 4000})
    done.set()
    reports = [results.get(timeout=300) for _ in consumers]
    for process in consumers:
        process.join(timeout=30)
    received = sorted(n for numbers, _ in reports for n in numbers)
    assert sum(unreadable for _, unreadable in reports) == 0
    assert received == list(range(MESSAGES))  # none lost, none twice
    assert os.listdir(folder / "out") == [] and os.listdir(folder / "processed") == []


@pytest.mark.parametrize("processed_folder", ["kept", "deleted"])
def test_a_message_waits_in_the_folder_for_a_consumer(folder, processed_folder):
    """Published with no consumer running (the worker is down): taken whole by the next one, even if
    the processed folder was deleted meanwhile."""
    # A queue name of its own: kombu keeps the bindings it declared per process, not per folder.
    name = f"later-{processed_folder}"
    with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(folder)) as conn:
        conn.SimpleQueue(name).put({"n": 1})
    assert [file.endswith(f".{name}.msg") for file in os.listdir(folder / "out")] == [True]
    if processed_folder == "deleted":
        (folder / "processed").rmdir()
    with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(folder)) as conn:
        message = conn.SimpleQueue(name).get(timeout=5)
        assert message.payload == {"n": 1}
        message.ack()
    assert os.listdir(folder / "out") == []


_PRINT_TRANSPORT = (
    "from chatapp.celery import app;"
    "print(type(app.connection_for_write().transport).__module__)"
)


@pytest.mark.parametrize(("redis_url", "module"), [(None, "chatapp.fs_broker"), ("redis://127.0.0.1:1/0",
                                                                                 "kombu.transport.redis")])
def test_settings_choose_this_transport_only_without_redis(tmp_path, redis_url, module):
    environ = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}}
    environ.update({"CHATAPP_VAR_DIR": str(tmp_path), **({"REDIS_URL": redis_url} if redis_url else {})})
    done = subprocess.run([sys.executable, "-c", _PRINT_TRANSPORT], cwd=ROOT, env=environ, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == module


def test_the_embedded_broker_starts_without_a_hostname_warning(folder, caplog):
    """Every `serve` (and worker) printed "WARNING No hostname was supplied. Reverting to default
    'localhost'": the folder broker has no host, and its address is shown all the same."""
    options = _options(folder)
    with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as conn, caplog.at_level(30):
        shown = conn.as_uri()
        conn.info()
    assert [record.getMessage() for record in caplog.records] == []
    assert shown.startswith("chatapp.fs_broker.Transport://")


def test_with_the_broker_folder_deleted_a_publish_fails_clearly_until_a_worker_polls(tmp_path):
    """var/celery-broker deleted (or its volume unmounted) under a running web process: a publish fails
    naming the folder, and makes none (the job stays pending for the sweep); the worker's next poll
    makes the folder again, and the next publish is delivered."""
    folder = tmp_path / "celery-broker"
    options = _options(folder)  # none of its folders exists, as after `rm -r var/celery-broker`
    with (Connection("filesystem://", transport=TRANSPORT, transport_options=options) as web,
          pytest.raises(ChannelError, match="celery-broker")):
        web.SimpleQueue("after-delete").put({"n": 6})
    assert not folder.exists()
    with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as worker:
        queue = worker.SimpleQueue("after-delete")
        with pytest.raises(queue.Empty):
            queue.get(timeout=0.2)
        with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as web:
            web.SimpleQueue("after-delete").put({"n": 7})
        message = queue.get(timeout=5)
        assert message.payload == {"n": 7}
        message.ack()
    assert os.listdir(folder / "out") == []


def test_a_consumer_whose_folder_is_deleted_goes_on_and_takes_the_next_message(folder):
    """The worker's poll met FileNotFoundError listing the missing folder, which kombu took for a broken
    connection; and a process that had declared its queue before published to the dead-letter queue
    ("ae.undeliver"), the bindings that route its messages having gone with the folder."""
    with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(folder)) as worker:
        queue = worker.SimpleQueue("while-deleted")
        with pytest.raises(queue.Empty):
            queue.get(timeout=0.2)
        shutil.rmtree(folder)
        with pytest.raises(queue.Empty):
            queue.get(timeout=0.2)
        with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(folder)) as web:
            web.SimpleQueue("while-deleted").put({"n": 8})
        message = queue.get(timeout=5)
        assert message.payload == {"n": 8}
        message.ack()
    assert sorted(os.listdir(folder)) == ["control", "out", "processed"]
    assert os.listdir(folder / "out") == []


@pytest.mark.parametrize(
    "content",
    [
        b"",  # a machine that lost power after the rename, before the data reached the disk
        b'{"body": "eyJuIjo',  # cut short (kombu's own writer, in a folder from a release before this one)
        b"\xff\xfe not text",
        b'["not", "a", "message"]',
        b'{"body": "e30=", "properties": {}}',  # no delivery tag
    ],
)
def test_an_unreadable_message_file_is_passed_over_and_the_next_message_taken(folder, content, caplog):
    """kombu took a message file it could not decode for a broken worker: "Unrecoverable error", and the
    worker exited, `serve` (its web server too) with it."""
    name = "after-unreadable"
    with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue(name)
        (folder / "out" / f"0_00000000-0000-0000-0000-000000000000.{name}.msg").write_bytes(content)
        queue.put({"n": 9})
        message = queue.get(timeout=5)
        assert message.payload == {"n": 9}
        message.ack()
    assert os.listdir(folder / "out") == []
    assert f"0_00000000-0000-0000-0000-000000000000.{name}.msg" in caplog.text
