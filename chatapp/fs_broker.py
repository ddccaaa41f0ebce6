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


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
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

    def _get(self, queue: str) -> Any:
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
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
            return loads(bytes_to_str(payload))
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
                os.makedirs(self.processed_folder, exist_ok=True)
            except OSError as exc:
                raise ChannelError(f"Cannot take {name!r} from {self.data_folder_in!r}") from exc
        raise ChannelError(f"Cannot move {name!r} into {self.processed_folder!r}")


class Transport(filesystem.Transport):
    Channel = Channel

    @property
    def default_connection_params(self) -> dict[str, Any]:
        # No host: kombu's virtual transports default to 'localhost', and every connection's info()
        # (the worker's banner, each start) logged "No hostname was supplied" as a WARNING.
        return {"port": self.default_port}
