"""Quality on synthetic data: ../shared/bench/score.py over the CLI, next to its recency baselines.

Generates datasets with ../shared/bench/make_dataset.py (default: 10 conversations x 30,000 tokens,
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

  .venv/bin/python bench/quality.py          # ~1.5 min on 2 cores
  .venv/bin/python bench/quality.py --quick  # 3 conversations, 5 questions each, one seed
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import OUT, PYTHON, ROOT, load_note, offline_tiktoken

SHARED = ROOT.parent / "shared" / "bench"


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
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.seeds, a.conversations, a.per_conversation = "1", 3, 5
    offline_tiktoken()
    OUT.mkdir(parents=True, exist_ok=True)

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

    failed = False
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
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
