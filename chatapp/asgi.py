"""ASGI entry point: streamed replies are served without tying up a worker thread per chat."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")

application = get_asgi_application()
