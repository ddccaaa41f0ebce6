"""The ASGI lifespan protocol for the web server (uvicorn `--lifespan on`): nothing to do at start-up;
at shutdown, once the server's grace period for open connections has ended, the replies still
streaming are stored as interrupted (reply_stream.replies_interrupt) so that their chats take sends
as soon as the server is back. Django's own handler answers HTTP only."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from chatapp.chat.reply_stream import replies_interrupt

logger = logging.getLogger(__name__)


async def lifespan_serve(receive: Callable[[], Awaitable[dict[str, Any]]],
                         send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            try:
                interrupted = await replies_interrupt(grace=settings.SHUTDOWN_GRACE_SECONDS)
            except Exception:  # the database gone with the machine: the sweep finishes them later
                logger.exception("replies streaming at shutdown could not be stored")
            else:
                if interrupted:
                    logger.warning("stopped with %s replies streaming: stored as interrupted", interrupted)
            await send({"type": "lifespan.shutdown.complete"})
            return
