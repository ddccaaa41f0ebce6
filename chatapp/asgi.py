"""ASGI entry point: streamed replies are served without tying up a worker thread per chat."""

import os

import django

from chatapp.instance import instance_prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
instance_prepare()  # before the settings are read: see chatapp.instance
django.setup(set_prefix=False)  # what get_asgi_application does first

from chatapp.chat.admission import SyncStackASGIHandler  # noqa: E402 (needs the apps loaded)

application = SyncStackASGIHandler()

# The first summary a process requested imported the task module (Celery, kombu, the broker's
# transport) in the middle of a turn: some 60 ms of CPU in one turn. Loaded with the application.
import chatapp.chat.tasks  # noqa: E402, F401
from chatapp.gc_tuning import gc_tune_for_serving  # noqa: E402

gc_tune_for_serving()  # last: what the imports above made is frozen (gc_tuning says why)
