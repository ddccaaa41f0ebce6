"""`manage.py summary_sweep`: the periodic pass that celery beat runs every
SUMMARY_SWEEP_INTERVAL_SECONDS, run once: summary jobs left pending (broker was down) or stale (worker
died), imports whose lease ran out and account deletions no worker went on with are published again,
unanswered compaction questions expire, and replies a dead web process left streaming are finished.

The workers sweep at start-up too; this command is for deployments without beat (e.g. a cron line)
and for operators after a broker outage.
"""

from django.core.management.base import BaseCommand

from chatapp.chat.tasks import sweep_pending_summary_jobs


class Command(BaseCommand):
    help = (
        "Publish pending or stale summary and import jobs and account deletions to the broker, expire "
        "unanswered compaction questions and finish replies left streaming."
    )

    def handle(self, *args, **options) -> None:
        # The task's own body, in this process: one pass, the same as beat's.
        result = sweep_pending_summary_jobs()
        self.stdout.write(
            f"{result['published']} of {result['candidates']} summary jobs published, "
            f"{result['expired']} unanswered compaction questions expired, "
            f"{result['imports_republished']} imports published again, "
            f"{result['account_deletions_republished']} account deletions published again, "
            f"{result['replies_interrupted']} replies left streaming finished."
        )
