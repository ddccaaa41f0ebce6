"""The embedded Celery broker: kombu's filesystem transport, with each message file appearing whole and
taken by exactly one consumer.

kombu's own transport (5.7) creates a message file under its final name and then writes into it, while
a consumer takes any file with that name: a poll that falls between the two reads an empty file, fails
to decode it and the message is gone (tests/app/test_fs_broker.py: 13 to 52 of 1,500 lost with kombu's
class; most likely what left a CI run's import job queued). A consumer also moves the file to the
system's temporary folder, which is a copy on another filesystem: two workers could both read one message.

Here a message is written under a hidden name and renamed into place (a rename is atomic within a
folder), and a consumer renames the file into the processed folder beside it: the one whose rename
succeeds has it. File names and folders are kombu's, so messages already queued are read as before.
Settings select this transport when no REDIS_URL is set (CELERY_BROKER_TRANSPORT).
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from queue import Empty
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

# Where this transport's class is, for CELERY_BROKER_TRANSPORT (kombu resolves the dotted name).
TRANSPORT = "chatapp.fs_broker.Transport"

logger = logging.getLogger(__name__)


class Channel(filesystem.Channel):
    # kombu's base class names the message `message`, its filesystem channel `payload`: one is overridden wrongly.
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        # kombu's name: milliseconds first, so a consumer's sorted listing is roughly oldest first.
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        # A leading dot and no ".msg" ending: no consumer takes it before the rename.
        partial = os.path.join(self.data_folder_out, f".{name}.partial")
        data = str_to_bytes(dumps(payload))
        try:
            with open(partial, "wb") as file:
                file.write(data)
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)  # a full disk: leave nothing behind
            raise ChannelError(f"Cannot add a message to {self.data_folder_out!r}") from exc

    def _get(self, queue: str, timeout: Any = None) -> Any:
        wanted = f"{queue}.msg"
        try:
            names = os.listdir(self.data_folder_in)
        except FileNotFoundError:
            # Deleted while this worker ran: kombu took the error for a broken connection and the
            # consumer stopped. Made again, empty, so that publishers (which make no folder: an unmounted
            # volume must not be written under) get through again; their failed jobs stay pending for
            # the sweep.
            _folder_make(self.data_folder_in)
            raise Empty() from None
        for name in sorted(names):
            if name.partition(".")[2] != wanted:
                continue
            taken = self._take(name)
            if taken is None:
                continue  # another consumer's rename came first: the message is theirs
            try:
                with open(taken, "rb") as file:
                    payload = file.read()
                if not self.store_processed:
                    os.remove(taken)
            except OSError as exc:
                raise ChannelError(f"Cannot read {taken!r}") from exc
            message = _message_or_none(payload)
            if message is None:
                logger.error("Passed over %r in %r (%d bytes): it holds no message", name, self.data_folder_in,
                             len(payload))
                continue
            return message
        raise Empty()

    def _take(self, name: str) -> str | None:
        """Move message file `name` into the processed folder; its new path, or None when another
        consumer moved it first."""
        source, taken = os.path.join(self.data_folder_in, name), os.path.join(self.processed_folder, name)
        for _ in range(2):
            try:
                os.rename(source, taken)
                return taken
            except FileNotFoundError:
                if not os.path.exists(source):
                    return None
                # The processed folder is what is missing (deleted while the worker ran): make it.
                _folder_make(self.processed_folder)
            except OSError as exc:
                raise ChannelError(f"Cannot take {name!r} from {self.data_folder_in!r}") from exc
        raise ChannelError(f"Cannot move {name!r} into {self.processed_folder!r}")

    def _size(self, queue: str) -> int:
        # Asked by every queue declaration, a publisher's too: a missing folder holds no message.
        try:
            return super()._size(queue)
        except FileNotFoundError:
            return 0

    def get_table(self, exchange: str) -> list[Any]:
        """The exchange's bindings, which route every message (a direct exchange's too). kombu reads them
        from the control folder only, while a process declares a binding once: with the folder deleted,
        its publishes matched nothing and went to the dead-letter queue, which no worker reads. This
        process's own bindings fill in, written back for the other processes."""
        table = super().get_table(exchange)
        if table:
            return table
        known = [filesystem.exchange_queue_t(*meta) for meta in self.state.exchanges.get(exchange, {}).get("table", [])]
        for meta in known:
            self._queue_bind(exchange, *meta)
        return known

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        try:
            super()._queue_bind(exchange, routing_key, pattern, queue)
        except FileNotFoundError as exc:  # kombu's own mkdir of the control folder, its parent gone
            raise ChannelError(f"Cannot bind {queue!r} in {str(self.control_folder)!r}") from exc


def _message_or_none(payload: bytes) -> dict[str, Any] | None:
    """The message a file holds, or None for one that holds none: empty (a machine that lost power after
    the rename, before the data reached the disk), cut short (kombu's own writer, in a folder from a
    release before this one) or not a message at all. kombu took what it could not decode for a broken
    worker, "Unrecoverable error": the worker exited, and `serve`, its web server too, with it."""
    try:
        message = loads(bytes_to_str(payload))
    except ValueError:  # not JSON, or not UTF-8
        return None
    properties = message.get("properties") if isinstance(message, dict) else None
    return message if isinstance(properties, dict) and "delivery_tag" in properties else None


def _folder_make(path: str) -> None:
    """Make a broker folder again, owner-only as instance_prepare makes var/."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise ChannelError(f"Cannot make the broker folder {path!r}") from exc


class Transport(filesystem.Transport):
    Channel = Channel

    @property
    def default_connection_params(self) -> dict[str, Any]:
        # No host: kombu's virtual transports default to 'localhost', and every connection's info()
        # (the worker's banner, each start) logged "No hostname was supplied" as a WARNING.
        return {"port": self.default_port}
