"""`manage.py summary_sweep`: publish summary jobs left pending (broker was down) or stale (worker died).

The workers do this at start-up and celery beat every SUMMARY_SWEEP_INTERVAL_SECONDS; this command is
for deployments without beat (e.g. a cron line) and for operators after a broker outage.
"""

from django.core.management.base import BaseCommand

from chatapp.chat.summary_services import summary_jobs_sweep


class Command(BaseCommand):
    help = "Publish pending or stale summary jobs to the broker and expire unanswered compaction questions."

    def handle(self, *args, **options) -> None:
        result = summary_jobs_sweep()
        self.stdout.write(
            f"{result['published']} of {result['candidates']} summary jobs published, "
            f"{result['expired']} unanswered compaction questions expired."
        )
