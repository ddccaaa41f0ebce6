"""Quality: ../shared/bench/score.py over the CLI and the web app, next to score.py's recency baselines.

Two parts (--parts dev,synthetic; both by default):

dev  The real development set ../shared/bench/data/locomo_dev.json (2 LoCoMo conversations, every
     question but the adversarial ones: --per-conversation 1000), --by-category, budgets
     2048,4096,8192 x fast,balanced,quality, --summarizer extractive, through BOTH packers:
       cli  `python -m optimizer pack` (the core: in-memory recall over the request's messages)
       app  `python manage.py pack` (the web app's request path: each request stored in the database,
            packed by context_build with the database recall source and the app's summaries); on
            SQLite (bench/out/quality_app.sqlite3, migrated here) or, when DATABASE_URL is set, on
            that database (PostgreSQL). One process per score.py run answers all its requests.
     Printed as markdown: per budget x preference, each packer's violations, evidence, answer,
     tok/budget and flow next to recency with the whole budget and with equal tokens; then evidence
     / answer per question category. Development figures, not results (see the data README).

synthetic  (the rows this script always printed) Generates datasets with ../shared/bench/make_dataset.py
(default: 10 conversations x 30,000 tokens,
seeds 1 and 2) into bench/out/, then runs score.py with
`--cmd ".venv/bin/python -m optimizer pack --summarizer S"` for S in none and extractive (score.py's
own --summarizer is set to match: request fields override CLI flags), at budgets 2048,4096,8192 and
preferences fast,balanced,quality. Raw score.py outputs are kept in bench/out/quality_*.txt/json.

Compact table (figures pooled over seeds, weighted by questions):
  viol      requests breaking a hard rule (over budget, system/question/pinned not verbatim, order)
  evid      share of evidence messages sent verbatim; eq = recency given exactly the tokens we used
  ans       share of questions whose answer text is in the context; eq as above
  base      recency with the whole budget (what the simplest tool gives)
  util      tokens used / budget
  >=eq      "ok" when evid >= eq evid and ans >= eq ans on every seed, else the shortfall

  .venv/bin/python bench/quality.py                    # dev (~15 min on 2 cores) + synthetic (~1.5 min)
  .venv/bin/python bench/quality.py --parts dev        # the dev set only
  DATABASE_URL=postgres://postgres@127.0.0.1:5432/test .venv/bin/python bench/quality.py --parts dev
  .venv/bin/python bench/quality.py --quick            # dev: 5 questions/conversation, 4096 x balanced;
                                                       # synthetic: 3 conversations, 5 questions, one seed
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import OUT, PYTHON, ROOT, load_note, offline_tiktoken

SHARED = ROOT.parent / "shared" / "bench"
DEV_SET = SHARED / "data" / "locomo_dev.json"
APP_SQLITE = OUT / "quality_app.sqlite3"


def app_env() -> tuple[dict[str, str], str]:
    """Environment for `manage.py pack`: DATABASE_URL as given (PostgreSQL), else a bench SQLite file."""
    env = dict(os.environ)
    if env.get("DATABASE_URL"):
        url = env["DATABASE_URL"]
        return env, ("postgresql" if url.startswith("postgres") else url.split(":", 1)[0])
    env["DATABASE_URL"] = f"sqlite:///{APP_SQLITE}"
    return env, "sqlite"


def run_dev_score(packer: str, a: argparse.Namespace) -> tuple[str, int, list[dict]]:
    js = OUT / f"quality_dev_{packer}.json"
    js.unlink(missing_ok=True)
    if packer == "cli":
        env, cmd = dict(os.environ), ".venv/bin/python -m optimizer pack --summarizer extractive"
    else:
        env, _ = app_env()
        cmd = ".venv/bin/python manage.py pack --summarizer extractive"
    args = [PYTHON, str(SHARED / "score.py"), "--dataset", str(a.dev_set), "--cmd", cmd,
            "--summarizer", "extractive", "--budgets", a.dev_budgets, "--preferences", a.preferences,
            "--model", a.model, "--per-conversation", str(a.dev_per_conversation), "--by-category",
            "--json", str(js)]
    run = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env)
    (OUT / f"quality_dev_{packer}.txt").write_text(run.stdout + run.stderr)
    rows = json.loads(js.read_text()) if js.exists() and run.returncode in (0, 1) else []
    return run.stdout + run.stderr, run.returncode, rows


def dev_part(a: argparse.Namespace) -> bool:
    """Run the dev set through both packers and print the markdown tables; True if anything failed."""
    env, db = app_env()
    # The app's tables (and the full-text index) must exist: migrate the bench database first.
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    packers = ["cli", "app"]
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = {p: pool.submit(run_dev_score, p, a) for p in packers}
        results = {p: f.result() for p, f in futures.items()}
    failed = False
    for p, (text, code, rows) in results.items():
        if a.raw or not rows:
            print(f"== score.py on the dev set, {p} (exit {code})")
            print(text.rstrip())
        failed |= not rows or any(r["violations"] for r in rows)
    label = {"cli": "`optimizer pack`", "app": f"`manage.py pack` ({db})"}
    n = next((r["requests"] for _, _, rows in results.values() for r in rows), 0)
    print(f"\n### Dev set: {a.dev_set.name}, {n} questions per row, --summarizer extractive, model {a.model}\n")
    print("evidence = evidence messages sent verbatim (in the flow or quoted whole); answer = answer text "
          "anywhere in the context; recency whole / eq = score.py's baselines with the whole budget / with "
          "the tokens the packer used; percentages\n")
    print("| budget | preference | packer | violations | evidence | answer | tok/budget | flow "
          "| recency whole: evidence / answer | recency eq: evidence / answer |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    by_key = {p: {(r["budget"], r["preference"]): r for r in rows} for p, (_, _, rows) in results.items()}
    keys = [(int(b), pref) for b in a.dev_budgets.split(",") for pref in a.preferences.split(",")]
    for key in keys:
        for p in packers:
            r = by_key[p].get(key)
            if r is None:
                print(f"| {key[0]} | {key[1]} | {label[p]} | (no result) | | | | | | |")
                continue
            print(f"| {key[0]} | {key[1]} | {label[p]} | {r['violations']} | {100 * r['evidence']:.1f} "
                  f"| {100 * r['answer']:.1f} | {r['tokens_per_budget']:.2f} | {r['flow_per_budget']:.2f} "
                  f"| {100 * r['baseline_evidence']:.1f} / {100 * r['baseline_answer']:.1f} "
                  f"| {100 * r['equal_tokens_evidence']:.1f} / {100 * r['equal_tokens_answer']:.1f} |")
    cats = sorted({c for p in packers for r in by_key[p].values() for c in r.get("categories", {})})
    print(f"\n### Dev set per category (evidence / answer, %; {label['cli']} vs {label['app']})\n")
    print("| budget | preference | " + " | ".join(cats) + " |")
    print("|---|---|" + "---|" * len(cats))
    for key in keys:
        cells = []
        for c in cats:
            parts = []
            for p in packers:
                v = by_key[p].get(key, {}).get("categories", {}).get(c)
                parts.append("-" if v is None else f"{100 * v['evidence']:.0f} / {100 * v['answer']:.0f}")
            q = next((by_key[p][key]["categories"][c]["questions"] for p in packers
                      if c in by_key[p].get(key, {}).get("categories", {})), 0)
            cells.append(f"{parts[0]} vs {parts[1]} ({q} q)")
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    ms = {p: [r["ms_per_request"] for r in by_key[p].values()] for p in packers}
    print(f"\nms/request, process start amortized ({load_note()}): "
          + ", ".join(f"{label[p]} {sum(v) / len(v):.1f}" for p, v in ms.items() if v))
    print(f"raw outputs: {OUT}/quality_dev_<packer>.txt / .json")
    return failed


def run_score(dataset: Path, summarizer: str, a: argparse.Namespace, tag: str) -> tuple[str, int, list[dict]]:
    js = OUT / f"quality_{tag}.json"
    cmd = [PYTHON, str(SHARED / "score.py"), "--dataset", str(dataset),
           "--cmd", f".venv/bin/python -m optimizer pack --summarizer {summarizer}",
           "--summarizer", summarizer, "--budgets", a.budgets, "--preferences", a.preferences,
           "--model", a.model, "--per-conversation", str(a.per_conversation), "--json", str(js)]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    (OUT / f"quality_{tag}.txt").write_text(run.stdout + run.stderr)
    rows = json.loads(js.read_text()) if js.exists() and run.returncode in (0, 1) else []
    return run.stdout + run.stderr, run.returncode, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--conversations", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=30000)
    ap.add_argument("--per-conversation", type=int, default=30)
    ap.add_argument("--budgets", default="2048,4096,8192")
    ap.add_argument("--preferences", default="fast,balanced,quality")
    ap.add_argument("--summarizers", default="none,extractive")
    ap.add_argument("--model", default="gpt-4o-mini")
    ap.add_argument("--jobs", type=int, default=2, help="score.py runs in parallel")
    ap.add_argument("--raw", action="store_true", help="also print score.py's own tables")
    ap.add_argument("--parts", default="dev,synthetic", help="dev (the real dev set), synthetic, or both")
    ap.add_argument("--dev-set", type=Path, default=DEV_SET)
    ap.add_argument("--dev-budgets", default="2048,4096,8192")
    ap.add_argument("--dev-per-conversation", type=int, default=1000, help="questions per dev conversation")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.seeds, a.conversations, a.per_conversation = "1", 3, 5
        a.dev_per_conversation, a.dev_budgets, a.preferences = 5, "4096", "balanced"
    offline_tiktoken()
    OUT.mkdir(parents=True, exist_ok=True)
    parts = set(a.parts.split(","))
    failed = dev_part(a) if "dev" in parts else False
    if "synthetic" in parts:
        failed = synthetic_part(a) or failed
    sys.exit(1 if failed else 0)


def synthetic_part(a: argparse.Namespace) -> bool:
    """The synthetic sets (make_dataset.py), pooled over seeds; True if a run failed."""
    failed = False
    print("\n### Synthetic data (make_dataset.py)\n")

    seeds = [int(s) for s in a.seeds.split(",")]
    summarizers = a.summarizers.split(",")
    datasets = {}
    for seed in seeds:
        path = OUT / f"quality_c{a.conversations}_t{a.tokens}_s{seed}.json"
        subprocess.run([PYTHON, str(SHARED / "make_dataset.py"), "--conversations", str(a.conversations),
                        "--tokens", str(a.tokens), "--seed", str(seed), "--out", str(path)], check=True)
        datasets[seed] = path
    jobs = [(seed, s) for s in summarizers for seed in seeds]
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = {job: pool.submit(run_score, datasets[job[0]], job[1], a, f"s{job[0]}_{job[1]}") for job in jobs}
        results = {job: f.result() for job, f in futures.items()}

    for (seed, summ), (text, code, rows) in results.items():
        if a.raw or not rows:
            print(f"== score.py, seed {seed}, --summarizer {summ} (exit {code})")
            print(text.rstrip())
        if not rows:
            failed = True

    print(f"quality: {a.conversations} conversations x ~{a.tokens:,} tokens, seeds {a.seeds}, "
          f"{a.per_conversation} questions/conversation, model {a.model}; percentages")
    cols = "".join(f" | {s:^40}" for s in summarizers)
    print(f"{'':>15} {'recency/whole':^13}{cols}")
    sub = "".join(f" | {'viol':>4} {'evid':>5} {'eq':>5} {'ans':>5} {'eq':>5} {'util':>4} {'>=eq':>6}"
                  for _ in summarizers)
    print(f"{'budget':>6} {'pref':>8} {'evid':>6} {'ans':>6}{sub}")
    budgets = [int(b) for b in a.budgets.split(",")]
    for budget in budgets:
        for pref in a.preferences.split(","):
            line, base = "", None
            for summ in summarizers:
                per_seed = []
                for seed in seeds:
                    per_seed += [r for r in results[(seed, summ)][2]
                                 if r["budget"] == budget and r["preference"] == pref]
                if not per_seed:
                    line += f" | {'(no result)':^40}"
                    continue
                n = sum(r["requests"] for r in per_seed)

                def pooled(key: str, rows: list[dict] = per_seed, n: int = n) -> float:
                    return 100 * sum(r[key] * r["requests"] for r in rows) / n

                viol = sum(r["violations"] for r in per_seed)
                short = max(max(r["equal_tokens_evidence"] - r["evidence"], r["equal_tokens_answer"] - r["answer"])
                            for r in per_seed)
                flag = "ok" if short <= 1e-9 else f"-{100 * short:.1f}"
                failed |= viol > 0
                base = base or (pooled("baseline_evidence"), pooled("baseline_answer"))
                line += (f" | {viol:>4} {pooled('evidence'):>5.1f} {pooled('equal_tokens_evidence'):>5.1f} "
                         f"{pooled('answer'):>5.1f} {pooled('equal_tokens_answer'):>5.1f} "
                         f"{pooled('tokens_per_budget') / 100:>4.2f} {flag:>6}")
            b = f"{base[0]:>6.1f} {base[1]:>6.1f}" if base else f"{'':>13}"
            print(f"{budget:>6} {pref:>8} {b}{line}")
    ms = {summ: [r["ms_per_request"] for seed in seeds for r in results[(seed, summ)][2]] for summ in summarizers}
    print(f"ms/request (CLI, incl. process start amortized; {load_note()}): "
          + ", ".join(f"{s} {sum(v) / len(v):.1f}" for s, v in ms.items() if v))
    print(f"raw outputs: {OUT}/quality_s<seed>_<summarizer>.txt / .json")
    return failed


if __name__ == "__main__":
    main()
