"""Celery application. Broker from settings: Redis when REDIS_URL is set, else the filesystem transport.

Run a worker with `celery -A chatapp worker -Q summaries,celery --concurrency N` (add `-B` on one
worker, or run `celery -A chatapp beat`, for the periodic sweep of summary jobs).
"""

import logging
import os

from celery import Celery
from celery.signals import worker_init

from chatapp.instance import instance_prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
instance_prepare()  # before the settings are read: see chatapp.instance

logger = logging.getLogger(__name__)

app = Celery("chatapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The optimizer core stays free of Celery and of the app: the tasks live in the chat app.
app.conf.include = ["chatapp.chat.tasks"]


@app.on_after_configure.connect
def _configure_summaries(sender: Celery, **kwargs) -> None:
    from django.conf import settings

    # Summary jobs go to their own queue so a backlog of them never delays other work. The sweep goes
    # with them: every worker that runs summaries can run it, whatever other queues it consumes.
    sender.conf.task_routes = {
        "optimizer.tasks.summarize_conversation": {"queue": settings.CELERY_SUMMARY_QUEUE},
        "optimizer.tasks.sweep_pending_summary_jobs": {"queue": settings.CELERY_SUMMARY_QUEUE},
    }
    # Publishes jobs left pending while the broker was unreachable, and ones whose worker died.
    sender.add_periodic_task(
        float(settings.SUMMARY_SWEEP_INTERVAL_SECONDS),
        sender.signature("optimizer.tasks.sweep_pending_summary_jobs"),
        name="sweep pending summary jobs",
    )


@worker_init.connect
def _system_checks_log(sender=None, **kwargs) -> None:
    """Log the system checks' findings, as `manage.py` commands print them. A worker is started without
    one, and Celery's Django fixup runs the checks but drops what they say: a worker started with a
    risky setting (chat.W001, its summary lease) said nothing of it. The database-tagged checks need a
    database and are left to `check --database` (the clock one is the tasks' own, at worker_ready)."""
    import django
    from django.apps import apps
    from django.core.checks import WARNING, run_checks

    if not apps.ready:  # Celery's fixup sets Django up on this same signal, before this receiver
        django.setup()
    for message in run_checks():
        level = logging.ERROR if message.is_serious() else logging.WARNING if message.level >= WARNING else logging.INFO
        logger.log(level, "System check: %s", message)
