"""Celery tasks for background summaries and conversation imports. Thin: the work is in summary_services
and import_services.

Imported by the Celery app (worker, beat) and by summary_services when it publishes a job. The task
names keep the `optimizer.tasks.` prefix of the release in which this module lived in the optimizer
package: messages already queued under those names still find their task after an upgrade.

Delivery guarantees: acks_late + reject_on_worker_lost, so a message whose worker dies is delivered
again; running it twice is safe because summary_job_run claims the job with a conditional update and
saves under a fencing token. Retries on 429/5xx/timeouts re-publish the job with a backoff countdown;
their number is bounded by the job's own attempt counter (settings.SUMMARY_MAX_RETRIES), which also
survives redeliveries and sweeps (Celery's per-message retry counter does not).
"""

from __future__ import annotations

import logging

from celery.signals import worker_init, worker_ready

from chatapp.celery import app
from chatapp.chat.import_services import import_job_fail, import_job_run, import_jobs_sweep
from chatapp.chat.reply_stream import reply_orphans_finish
from chatapp.chat.summary_runner import summary_job_fail, summary_job_run
from chatapp.chat.summary_services import summary_jobs_sweep

logger = logging.getLogger(__name__)


@app.task(
    name="optimizer.tasks.summarize_conversation",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    # The job's attempt counter is the real bound; Celery's is per message chain.
    max_retries=None,
)
def summarize_conversation(self, job_id: int) -> str:
    try:
        outcome = summary_job_run(job_id=job_id)
    except Exception as exc:
        # A bug or a database error: fail the job with a reason instead of redelivering it forever.
        logger.exception("summary job %s crashed", job_id)
        summary_job_fail(job_id=job_id, reason=f"Internal error while summarizing ({type(exc).__name__}).")
        raise
    if outcome.status == "retry":
        logger.info("summary job %s: retrying in %.1f s (%s)", job_id, outcome.retry_in, outcome.detail)
        raise self.retry(countdown=outcome.retry_in)
    logger.info("summary job %s: %s %s", job_id, outcome.status, outcome.detail)
    return outcome.status


@app.task(
    name="chatapp.chat.tasks.import_conversations",
    bind=True,
    # Safe to deliver twice: import_job_run claims the job (queued -> running) with a conditional
    # update, fences every write, and a redelivery after a worker died resumes after the last
    # stored conversation once the lease has run out (import_services).
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    max_retries=None,  # bounded by the job's own attempt counter (import_services.MAX_ATTEMPTS)
)
def import_conversations(self, job_id: int) -> str:
    try:
        outcome = import_job_run(job_id=job_id)
    except Exception as exc:
        logger.exception("import job %s crashed", job_id)
        import_job_fail(job_id=job_id, reason=f"Internal error while importing ({type(exc).__name__}).")
        raise
    if outcome.status == "busy":  # another delivery holds the job: look again once its lease ends
        raise self.retry(countdown=outcome.retry_in)
    logger.info("import job %s: %s %s", job_id, outcome.status, outcome.detail)
    return outcome.status


@app.task(name="optimizer.tasks.sweep_pending_summary_jobs", ignore_result=True)
def sweep_pending_summary_jobs() -> dict[str, int]:
    outcome = summary_jobs_sweep()
    # Replies a dead web process left "streaming": the same periodic pass finishes them.
    outcome["replies_interrupted"] = reply_orphans_finish()
    # Imports whose worker died: published again (import_services).
    outcome["imports_republished"] = import_jobs_sweep()
    return outcome


@worker_init.connect
def _warm_up(sender=None, **kwargs) -> None:
    """Load the tokenizer encodings, the model registry and the openai SDK's resource modules (which
    it imports lazily on first use) once in the parent process, before the pool forks, instead of in
    every child's first job (one to three seconds)."""
    import openai.resources  # noqa: F401

    import optimizer

    for model in ("gpt-4o-mini", "gpt-4"):
        optimizer.count_text("warm up", model=model)
    optimizer.cost_usd("gpt-4o-mini", prompt_tokens=1)


@worker_ready.connect
def _sweep_on_worker_start(sender=None, **kwargs) -> None:
    """A worker coming up publishes what was missed while no worker (or no broker) was there."""
    try:
        summary_jobs_sweep()
    except Exception:  # the worker must start even if the database is momentarily unreachable
        logger.exception("summary sweep at worker start failed")
