"""What the background jobs (SummaryJob, ImportJob) share: the claim-and-lease protocol's columns.

Both jobs are run by a Celery delivery that claims the row with one conditional UPDATE (bumping
`attempts`), holds it under a lease and writes only while the row still carries its attempt; a sweep
publishes a job again once its lease has run out. Declaring the columns once keeps the two tables'
protocol columns the same; the services that drive each job stay with the job (their states differ).
"""

from __future__ import annotations

from django.db import models


class LeasedJob(models.Model):
    # Deliveries that claimed the job: the fencing token of the current one (a stale delivery's writes
    # are refused) and what bounds the retries (a worker that died, a model that kept failing).
    attempts = models.PositiveSmallIntegerField(default=0)
    # Until when the current holder (a queued broker message or a running worker) is trusted; past it
    # the sweep publishes the job again and a redelivery may take it over (the worker or message died).
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # What went wrong, shown to the user (each job's services say when they write it).
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # The first claim (a takeover keeps it) and the end, whatever the outcome.
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
