"""Celery tasks for background summaries, conversation imports, chat titles and account deletions. Thin: the work
is in summary_services, import_services, title_services and account_purge.

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
from collections.abc import Callable
from typing import Any

from celery import Task
from celery.signals import worker_init, worker_ready
from django.db import DatabaseError

from chatapp.celery import app
from chatapp.chat.account_purge import account_purge, account_purges_sweep
from chatapp.chat.dbclock import CLOCK_SYNC_HINT, clock_skew_measure, clock_skew_problem
from chatapp.chat.import_services import import_job_run, import_jobs_sweep
from chatapp.chat.reply_stream import reply_orphans_finish
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import summary_jobs_sweep
from chatapp.chat.title_services import conversation_title_generate
from chatapp.env_celery import recheck_wait

logger = logging.getLogger(__name__)


def _job_deliver(
    task: Task,
    *,
    job_id: int,
    kind: str,
    run: Callable[..., Any],
    retry_status: str,
) -> str:
    """One delivery of a job's message: run it; an outcome of `retry_status` is published again after
    the countdown the run chose. A crash (a bug, a database error) is not delivered again: `run` has
    failed the attempt it claimed, with a reason (not the job, which another delivery may hold now)."""
    try:
        outcome = run(job_id=job_id)
    except Exception:
        logger.exception("%s job %s crashed", kind, job_id)
        raise
    if outcome.status == retry_status:
        logger.info("%s job %s: retrying in %.1f s (%s)", kind, job_id, outcome.retry_in, outcome.detail)
        raise task.retry(countdown=outcome.retry_in)
    logger.info("%s job %s: %s %s", kind, job_id, outcome.status, outcome.detail)
    return str(outcome.status)


# A job's message (a summary, an import): delivered again when its worker dies (see above: running it
# twice is safe), retried as often as the job's own attempt counter allows (Celery's counts per
# message chain, so it is no bound).
_JOB_TASK: dict[str, Any] = {
    "bind": True, "acks_late": True, "reject_on_worker_lost": True, "ignore_result": True, "max_retries": None,
}


@app.task(name="optimizer.tasks.summarize_conversation", **_JOB_TASK)
def summarize_conversation(self, job_id: int) -> str:
    return _job_deliver(self, job_id=job_id, kind="summary", run=summary_job_run, retry_status="retry")


# Safe to deliver twice: import_job_run claims the job (queued -> running) with a conditional update,
# fences every write, and a redelivery after a worker died resumes after the last stored conversation
# once the lease has run out (import_services; its attempts are bounded by MAX_ATTEMPTS there).
@app.task(name="chatapp.chat.tasks.import_conversations", **_JOB_TASK)
def import_conversations(self, job_id: int) -> str:
    # "busy": another delivery holds the job; it is looked at again once that one's lease ends.
    return _job_deliver(self, job_id=job_id, kind="import", run=import_job_run, retry_status="busy")


# Safe to deliver twice: the title is stored only over the one it was asked to replace, so a second run
# finds it changed and skips (title_services). The model call's own retries are its bound, and a third
# delivery (its worker died twice) gives up (title_services.TITLE_MAX_DELIVERIES).
@app.task(name="chatapp.chat.tasks.generate_conversation_title", acks_late=True, reject_on_worker_lost=True,
          ignore_result=True)
def generate_conversation_title(conversation_id: int, expected: str) -> str:
    outcome = conversation_title_generate(conversation_id=conversation_id, expected=expected)
    logger.info("title of conversation %s: %s", conversation_id, outcome)
    return outcome


# Safe to deliver twice (acks_late): each step deletes what is still there, and a run after the last one
# finds no deletion and skips (account_purge). A database error (a lock wait timing out, a connection
# lost) is retried a few times; the steps done stay done, and the sweep publishes what is still left.
@app.task(name="chatapp.chat.tasks.purge_account", bind=True, acks_late=True, reject_on_worker_lost=True,
          ignore_result=True, max_retries=5)
def purge_account(self, user_id: int) -> str:
    try:
        outcome = account_purge(user_id=user_id)
    except DatabaseError as exc:
        logger.warning("deletion of account %s: retrying (%s)", user_id, exc)
        raise self.retry(exc=exc, countdown=recheck_wait(30)) from None
    logger.info("deletion of account %s: %s", user_id, outcome)
    return outcome


@app.task(name="optimizer.tasks.sweep_pending_summary_jobs", ignore_result=True)
def sweep_pending_summary_jobs() -> dict[str, int]:
    outcome = summary_jobs_sweep()
    # Replies a dead web process left "streaming": the same periodic pass finishes them.
    outcome["replies_interrupted"] = reply_orphans_finish()
    # Imports whose worker died: published again (import_services).
    outcome["imports_republished"] = import_jobs_sweep()
    # Account deletions whose worker died, or whose message was never published.
    outcome["account_deletions_republished"] = account_purges_sweep()
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
def _on_worker_start(sender=None, **kwargs) -> None:
    """A worker coming up publishes what was missed while no worker (or no broker) was there:
    imports as well as summaries, or an import whose message a restarted broker lost would wait for
    the periodic sweep. Then it compares its clock with the database's."""
    for kind, sweep in (("summary", summary_jobs_sweep), ("import", import_jobs_sweep),
                        ("account deletion", account_purges_sweep)):
        try:
            sweep()
        except Exception:  # the worker must start even if the database is momentarily unreachable
            logger.exception("%s sweep at worker start failed", kind)
    _clock_skew_warn()


def _clock_skew_warn() -> None:
    """A worker judges every machine's leases and heartbeats by its own clock (dbclock): say so in
    its log when that clock is off the database's. Workers are started without `manage.py check`."""
    try:
        problem = clock_skew_problem(clock_skew_measure())
    except Exception:
        logger.exception("could not compare this machine's clock with the database's")
        return
    if problem is not None:
        logger.warning("%s %s", problem, CLOCK_SYNC_HINT)
