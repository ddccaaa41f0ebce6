"""ASGI entry point: streamed replies are served without tying up a worker thread per chat."""

import os

from django.core.asgi import get_asgi_application

from chatapp.instance import instance_prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
instance_prepare()  # before the settings are read: see chatapp.instance

application = get_asgi_application()

# The first summary a process requested imported the task module (Celery, kombu, the broker's
# transport) in the middle of a turn: some 60 ms of CPU in one turn. Loaded with the application.
import chatapp.chat.tasks  # noqa: E402, F401
