"""Celery application. Broker from settings: Redis when REDIS_URL is set, else the filesystem transport."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")

app = Celery("chatapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The optimizer core stays free of Celery; its task adapters live in optimizer.tasks.
app.conf.include = ["optimizer.tasks"]
