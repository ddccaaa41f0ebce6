"""bench/load.py's checks (no message lost, every user's turns in order, no summary lost or made
twice) and its report."""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter, defaultdict
from typing import Any

from load_seed import ACTIVE, UserPlan
from load_traffic import Kill, LoadRun, Turn
from web_ttfb import (
    percentile,
)

# --- the checks -----------------------------------------------------------------------------------------

def check_messages(plans: list[UserPlan], turns: list[Turn]) -> dict[str, Any]:
    from chatapp.chat.models import Message

    conversation_ids = [p.conversation_id for p in plans]
    by_key: dict[str, list[dict]] = defaultdict(list)
    for m in Message.objects.filter(conversation_id__in=conversation_ids, role="user").exclude(client_key="") \
            .values("id", "client_key", "content"):
        by_key[m["client_key"]].append(m)
    replies = {m["id"]: m for m in Message.objects.filter(conversation_id__in=conversation_ids, role="assistant")
               .values("id", "status", "content", "reply_to_id")}
    lost, incomplete, duplicated = 0, 0, 0
    for t in turns:
        stored = by_key.get(t.key, [])
        duplicated += max(0, len(stored) - 1)
        if t.user_message_id is not None and (len(stored) != 1 or stored[0]["content"] != t.text):
            lost += 1
        if t.outcome == "done":
            reply = replies.get(t.reply_id or -1)
            if reply is None or reply["status"] != "complete" or reply["content"] != t.streamed:
                incomplete += 1
    left_streaming = sum(1 for r in replies.values() if r["status"] == "streaming")
    error_replies = sum(1 for r in replies.values() if r["status"] in ("error", "stopped"))
    return {"lost_user_messages": lost, "incomplete_replies": incomplete, "replies_left_streaming": left_streaming,
            "duplicate_messages": duplicated, "error_replies_stored": error_replies,
            "lost_messages": lost + incomplete + left_streaming}


def check_order(plans: list[UserPlan], turns: list[Turn]) -> int:
    """Users whose new chat messages are not u1, r1, u2, r2, ... in send order (each reply answering the
    message before it)."""
    from chatapp.chat.models import Message

    sent: dict[int, list[Turn]] = defaultdict(list)
    for t in sorted(turns, key=lambda t: (t.user, t.turn)):
        if t.user_message_id is not None:
            sent[t.user].append(t)
    rows: dict[int, list[dict]] = defaultdict(list)
    plan_of = {p.conversation_id: p for p in plans}
    for m in (Message.objects.filter(conversation_id__in=list(plan_of), kind="chat")
              .order_by("conversation_id", "id").values("id", "conversation_id", "role", "client_key", "reply_to_id")):
        if m["id"] > plan_of[m["conversation_id"]].seed_last_id:
            rows[plan_of[m["conversation_id"]].index].append(m)
    bad = 0
    for plan in plans:
        got, expected = rows.get(plan.index, []), sent.get(plan.index, [])
        users = [m for m in got if m["role"] == "user"]
        ok = [m["client_key"] for m in users] == [t.key for t in expected] and len(got) == 2 * len(users)
        ok = ok and all(got[2 * n]["role"] == "user" and got[2 * n + 1]["role"] == "assistant"
                        and got[2 * n + 1]["reply_to_id"] == got[2 * n]["id"] for n in range(len(users)))
        bad += 0 if ok else 1
    return bad


def check_summaries(plans: list[UserPlan], kill: Kill) -> dict[str, Any]:
    from chatapp.chat.models import Message, OptimizationRecord, SummaryJob

    conversation_ids = [p.conversation_id for p in plans]
    jobs = list(SummaryJob.objects.filter(conversation_id__in=conversation_ids)
                .values("id", "conversation_id", "status", "trigger", "attempts", "summary_id", "created_at"))
    summaries = list(Message.objects.filter(conversation_id__in=conversation_ids, kind="summary").order_by("id")
                     .values("id", "conversation_id", "covers_from_id", "covers_through_id"))
    records = list(OptimizationRecord.objects.filter(conversation_id__in=conversation_ids)
                   .order_by("conversation_id", "id").values_list("conversation_id", "strategy", "created_at"))
    decided_turns: dict[int, list[int]] = defaultdict(list)
    decided_at: dict[int, list] = defaultdict(list)
    seen: Counter = Counter()
    for conversation_id, strategy, created_at in records:
        seen[conversation_id] += 1
        if strategy == "summarize":
            decided_turns[conversation_id].append(seen[conversation_id])
            decided_at[conversation_id].append(created_at)
    # An automatic job is created by the web process's summary-request thread after the turn's commit:
    # its delay after the latest summarize decision before it shows that thread's backlog.
    request_lag = [(j["created_at"] - max(t for t in decided_at[j["conversation_id"]] if t <= j["created_at"]))
                   .total_seconds() * 1000 for j in jobs if j["trigger"] == "auto"
                   and any(t <= j["created_at"] for t in decided_at[j["conversation_id"]])]
    decided = set(decided_turns)
    with_job = {j["conversation_id"] for j in jobs}
    still_active = sum(1 for j in jobs if j["status"] in ACTIVE)
    done_without = sum(1 for j in jobs if j["status"] == "done" and j["summary_id"] is None)
    never_created = len(decided - with_job)
    state = {j["id"]: j for j in jobs}
    killed_unfinished = sum(1 for j in kill.in_flight if state.get(j, {}).get("status") in ACTIVE)
    claimed = Counter(j["summary_id"] for j in jobs if j["summary_id"] is not None)
    orphans = sum(1 for s in summaries if s["id"] not in claimed)
    shared = sum(n - 1 for n in claimed.values() if n > 1)
    ranges = Counter((s["conversation_id"], s["covers_from_id"], s["covers_through_id"]) for s in summaries)
    same_range = sum(n - 1 for n in ranges.values() if n > 1)
    regressed, reach = 0, {}
    for s in summaries:
        if s["covers_through_id"] <= reach.get(s["conversation_id"], 0):
            regressed += 1
        reach[s["conversation_id"]] = max(reach.get(s["conversation_id"], 0), s["covers_through_id"])
    return {
        "summary_jobs": len(jobs),
        "jobs_by_status": dict(Counter(j["status"] for j in jobs)),
        "jobs_by_trigger": dict(Counter(j["trigger"] for j in jobs)),
        "jobs_reclaimed": sum(1 for j in jobs if j["attempts"] >= 2),
        "auto_job_request_lag_ms": {"p50": round(statistics.median(request_lag)), "max": round(max(request_lag))}
        if request_lag else None,
        "summaries_written": len(summaries),
        "conversations_with_summary": len({s["conversation_id"] for s in summaries}),
        "conversations_deciding_summarize": len(decided),
        "lost_summaries": still_active + done_without + never_created + killed_unfinished,
        "lost_detail": {"still_active": still_active, "done_without_summary": done_without,
                        "decided_without_job": never_created, "killed_unfinished": killed_unfinished},
        # the turns (1 = the first of the run) that chose summarize in conversations that got no job
        "decided_without_job_turns": [decided_turns[c] for c in sorted(decided - with_job)],
        "duplicate_summaries": orphans + shared + same_range + regressed,
        "duplicate_detail": {"unclaimed_summaries": orphans, "summary_of_two_jobs": shared,
                             "same_range_twice": same_range, "regressed_coverage": regressed},
        "killed_jobs_reclaimed": sum(1 for j in kill.running_at_kill if state.get(j, {}).get("attempts", 0) >= 2),
        "killed_jobs_done": sum(1 for j in kill.in_flight if state.get(j, {}).get("status") == "done"),
    }


def trigger_turns(plans: list[UserPlan]) -> dict[str, Any]:
    """Per user, the first turn whose record says the trigger fired (and with which strategy)."""
    from chatapp.chat.models import OptimizationRecord

    plan_of = {p.conversation_id: p for p in plans}
    first: dict[int, tuple[int, str]] = {}
    records = (OptimizationRecord.objects.filter(conversation_id__in=list(plan_of)).order_by("conversation_id", "id")
               .values("conversation_id", "triggered", "strategy", "summary_id"))
    seen: Counter = Counter()
    summary_sent = 0
    for r in records:
        seen[r["conversation_id"]] += 1
        summary_sent += r["summary_id"] is not None
        if r["triggered"] and r["conversation_id"] not in first:
            first[r["conversation_id"]] = (seen[r["conversation_id"]], r["strategy"])
    on_plan = sum(1 for c, (turn, _) in first.items() if turn == plan_of[c].trigger_turn)
    return {"first_trigger_turn": dict(sorted(Counter(t for t, _ in first.values()).items())),
            "first_trigger_strategy": dict(Counter(s for _, s in first.values())),
            "users_triggered": len(first), "triggered_on_planned_turn": on_plan,
            "turns_sending_a_summary": summary_sent}


def summarize(args, plans, run: LoadRun, kill: Kill, checks: dict[str, Any], extra: dict[str, Any]) -> dict:
    ttfb = [t.ttfb_ms for t in run.turns if t.ttfb_ms is not None]
    errors = [t for t in run.turns if t.outcome != "done"]
    by_turn = defaultdict(list)
    for t in run.turns:
        if t.ttfb_ms is not None:
            by_turn[t.turn + 1].append(t.ttfb_ms)
    return {
        "users": len(plans), "turns": len(run.turns), "turns_per_user": args.turns, "web_processes": args.web,
        "workers": args.workers, "worker_concurrency": args.concurrency,
        "ttfb_p50_ms": round(statistics.median(ttfb), 1) if ttfb else None,
        "ttfb_p95_ms": round(percentile(ttfb, 0.95), 1) if ttfb else None,
        "ttfb_max_ms": round(max(ttfb), 1) if ttfb else None,
        "ttfb_p50_by_turn_ms": {k: round(statistics.median(v), 1) for k, v in sorted(by_turn.items())},
        "errors": len(errors), "error_kinds": dict(Counter(t.outcome for t in errors)),
        "turns_done": sum(1 for t in run.turns if t.outcome == "done"),
        "lost_messages": checks["lost_messages"], "duplicate_summaries": checks["duplicate_summaries"],
        "lost_summaries": checks["lost_summaries"], "out_of_order_users": checks["out_of_order_users"],
        "worker_killed": kill.happened, "summaries_written": checks["summaries_written"],
        "wall_seconds": round(run.wall_seconds, 1), "ramp_s": args.ramp,
        "kill": {"at_turns": kill.at_turns, "jobs_held_by_killed_worker": kill.in_flight,
                 "running_in_db_at_kill": kill.running_at_kill, "waited_for_jobs_s": round(kill.waited_for_jobs_s, 1),
                 "restart_after_s": args.restart_after, "restart_ready_s": round(kill.restart_ready_s, 1),
                 "error": kill.error},
        "checks": checks,
        "loop_lag_ms": {"p50": round(statistics.median(run.loop_lag_ms), 1),
                        "p99": round(percentile(run.loop_lag_ms, 0.99), 1),
                        "max": round(max(run.loop_lag_ms), 1)} if run.loop_lag_ms else None,
        "bench_cpu_share": round(run.bench_cpu_seconds / run.wall_seconds, 2) if run.wall_seconds else None,
        **extra,
    }


def print_table(r: dict) -> None:
    c = r["checks"]
    print(f"\nload: {r['users']} users x {r['turns_per_user']} turns on {r['web_processes']} uvicorn processes, "
          f"{r['workers']} Celery workers (concurrency {r['worker_concurrency']}), one PostgreSQL "
          f"({r['database']}), one Redis (db {r['redis_db']}: broker + cache); chat model {r['chat_model']}, "
          f"summaries {r['summary_model']}; load average {r['load_average']} on {os.cpu_count()} CPUs")
    rows = [
        ("wall time of the load", f"{r['wall_seconds']} s ({r['turns_done']}/{r['turns']} turns done, "
                                  f"{r['turns'] / r['wall_seconds']:.1f} turns/s; users arrive over {r['ramp_s']} s)"),
        ("TTFB p50 / p95 / max", f"{r['ttfb_p50_ms']} / {r['ttfb_p95_ms']} / {r['ttfb_max_ms']} ms"),
        ("TTFB p50 by turn", ", ".join(f"{k}: {v}" for k, v in r["ttfb_p50_by_turn_ms"].items()) + " ms"),
        ("errors", f"{r['errors']} {r['error_kinds'] or ''}"),
        ("lost messages", f"{r['lost_messages']} (user messages {c['lost_user_messages']}, replies incomplete "
                          f"{c['incomplete_replies']}, left streaming {c['replies_left_streaming']}; duplicated "
                          f"{c['duplicate_messages']})"),
        ("out-of-order users", r["out_of_order_users"]),
        ("worker killed", f"{r['worker_killed']} after {r['kill']['at_turns']} turns, holding jobs "
                          f"{r['kill']['jobs_held_by_killed_worker']} ({len(r['kill']['running_in_db_at_kill'])} "
                          f"running); restarted {r['kill']['restart_after_s']} s later, ready in "
                          f"{r['kill']['restart_ready_s']} s {r['kill']['error']}"),
        ("killed jobs", f"{c['killed_jobs_done']} done, {c['killed_jobs_reclaimed']} of the running ones "
                        "claimed again (attempts >= 2)"),
        ("summary jobs", f"{c['summary_jobs']} {c['jobs_by_status']} by trigger {c['jobs_by_trigger']}; "
                         f"drained {r['drain_seconds']} s after the load; {r['sweep_republished']} published "
                         f"again by the sweep; an automatic job created {c['auto_job_request_lag_ms']} ms after "
                         "the turn that chose summarize"),
        ("web processes stopped", ", ".join(f"{w['seconds']} s" + (" (KILLED)" if w["killed"] else "")
                                            for w in r["web_stops"]) + " after SIGTERM"),
        ("summaries written", f"{r['summaries_written']} in {c['conversations_with_summary']} conversations "
                              f"({c['conversations_deciding_summarize']} chose summarize); turns sending one "
                              f"{r['triggers']['turns_sending_a_summary']}"),
        ("lost summaries", f"{r['lost_summaries']} {c['lost_detail']}"
                           + (f" turns choosing summarize there: {c['decided_without_job_turns']}"
                              if c["decided_without_job_turns"] else "")),
        ("duplicate summaries", f"{r['duplicate_summaries']} {c['duplicate_detail']}"),
        ("first trigger turn", f"{r['triggers']['first_trigger_turn']} {r['triggers']['first_trigger_strategy']} "
                               f"({r['triggers']['triggered_on_planned_turn']}/{r['triggers']['users_triggered']} on "
                               "the planned turn)"),
        ("load generator", f"event loop lag {r['loop_lag_ms']} ms, CPU {r['bench_cpu_share']} of a core"),
        ("CPU seconds", ", ".join(f"{k} {v}" for k, v in r["cpu_seconds"].items())),
    ]
    for name, value in rows:
        print(f"  {name:<22} {value}")
    if r.get("stuck"):
        print(f"  stuck jobs: {json.dumps(r['stuck'], indent=1)}")
    if r.get("logs"):
        print(f"  logs kept in {r['logs']}")
    print(f"\n{'PASS' if r['passed'] else 'FAIL'}: " + "; ".join(r["failures"] or ["every check is 0"]))


def failures_of(r: dict) -> list[str]:
    failed = [f"{k} = {r[k]}" for k in ("errors", "lost_messages", "duplicate_summaries", "lost_summaries",
                                        "out_of_order_users") if r[k]]
    if not r["worker_killed"]:
        failed.append("no worker was killed")
    elif not r["kill"]["jobs_held_by_killed_worker"]:
        failed.append("the killed worker held no summary job")
    if r["checks"]["duplicate_messages"]:
        failed.append(f"duplicate messages = {r['checks']['duplicate_messages']}")
    return failed
