"""System checks for setting combinations that are valid one by one but risky together."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Warning, register


@register()
def summary_lease_check(app_configs, **kwargs) -> list[Warning]:
    # The worker renews a job's lease before each model call; a call that can outlast the lease lets
    # the sweep hand the job to another worker mid-call, and the first worker's result is discarded.
    if settings.SUMMARY_JOB_LEASE_SECONDS > settings.LLM_TIMEOUT_SECONDS:
        return []
    return [
        Warning(
            f"SUMMARY_JOB_LEASE_SECONDS ({settings.SUMMARY_JOB_LEASE_SECONDS}) does not exceed "
            f"LLM_TIMEOUT_SECONDS ({settings.LLM_TIMEOUT_SECONDS}): a slow summary call can be taken over "
            "by another worker and its result discarded.",
            hint="Set SUMMARY_JOB_LEASE_SECONDS above LLM_TIMEOUT_SECONDS.",
            id="chat.W001",
        )
    ]
