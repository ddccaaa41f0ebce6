"""Where the evidence that recall misses is lost: never found, or found and ranked too low to fit.

For every question of the dev set (../shared/bench/data/locomo_dev.json, the adversarial ones aside,
as `quality.py --parts dev` asks them), the core packs the conversation with the question as the
newest message (stateless, in-memory recall, no summarizer) at one budget and preference. Each
evidence message is then counted as

  sent         in the packed context (window or recall block)
  rank > N     not sent, but among the search hits: its exchange ranks below the N-th in
               `optimizer.recall.rank_passages` over every hit (no room limit, nothing floored),
               the request's window excluded as pack excludes it
  not found    shares no index term with the question (`optimizer.lexical`)

by question category. It tells ranking (rank > N) from retrieval (not found) as the bottleneck.

  .venv/bin/python bench/recall_misses.py                      # 4096 tokens, fast
  .venv/bin/python bench/recall_misses.py --budget 2048 --preference balanced
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections import Counter, defaultdict

from _common import ROOT, offline_tiktoken

SHARED = ROOT.parent / "shared" / "bench"
SYSTEM = "You are a helpful assistant. Answer from the conversation when you can."  # score.py's prompt
DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%d.%m.%Y, %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d")
RANK_STEPS = (40, 20, 10)


def parse_date(text: object) -> dt.datetime | None:
    for fmt in DATE_FORMATS:
        try:
            return dt.datetime.strptime(str(text).strip(), fmt)
        except ValueError:
            continue
    return None


def exchange_ranks(hits: list[tuple[str, float]], links: dict) -> dict[str, int]:
    """Each message's best (lowest) rank among the exchanges the ranked hits would quote."""
    from optimizer.recall import rank_passages

    ranks: dict[str, int] = {}
    for k, (hit_id, _) in enumerate(rank_passages(hits, links)):
        before, after = links.get(hit_id, (None, None))
        for i in (before, hit_id, after):
            if i is not None:
                ranks.setdefault(i, k)
    return ranks


def kind_of(evidence: str, sent: set[str], ranks: dict[str, int]) -> str:
    if evidence in sent:
        return "sent"
    if evidence not in ranks:
        return "not found"
    return next((f"rank > {n}" for n in RANK_STEPS if ranks[evidence] >= n), "rank <= 10")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=str(SHARED / "data" / "locomo_dev.json"))
    ap.add_argument("--budget", type=int, default=4096)
    ap.add_argument("--preference", default="fast")
    a = ap.parse_args()
    offline_tiktoken()
    from optimizer import Msg, pack
    from optimizer.lexical import build_query
    from optimizer.recall import MemorySource, RecallItem

    totals: Counter[str] = Counter()
    by_category: dict[str, Counter[str]] = defaultdict(Counter)
    for conv in json.loads(open(a.dataset, encoding="utf-8").read()):  # noqa: SIM115
        base = [Msg(id="__system__", role="system", content=SYSTEM)] + [
            Msg(id=m["id"], role=m["role"], content=m["content"], created_at=parse_date(m.get("date")))
            for m in conv["messages"]
        ]
        for q in conv["questions"]:
            if str(q.get("category")) == "5" or not q.get("evidence"):
                continue
            msgs = [*base, Msg(id="__question__", role="user", content=q["question"])]
            source = MemorySource([RecallItem(id=m.id, role=m.role, content=m.content, position=k,
                                              created_at=m.created_at) for k, m in enumerate(msgs)])
            result = pack(msgs, budget=a.budget, preference=a.preference, recall_source=source)
            sent = {i for p in result.messages for i in p.source_ids}
            window = frozenset(p.source_ids[0] for p in result.messages if p.origin in ("verbatim", "pinned"))
            hits = source.search(build_query(q["question"]), limit=100_000, exclude_ids=window)
            ranks = exchange_ranks(hits, source.neighbours([i for i, _ in hits]))
            for e in q["evidence"]:
                kind = kind_of(e, sent, ranks)
                totals[kind] += 1
                by_category[q.get("category_name", str(q.get("category")))][kind] += 1
    kinds = ["sent", "rank <= 10", *(f"rank > {n}" for n in reversed(RANK_STEPS)), "not found"]
    print(f"evidence messages at {a.budget} tokens, {a.preference} (stateless, in-memory recall)")
    print(f"| category | {' | '.join(kinds)} |")
    print(f"|---|{'---|' * len(kinds)}")
    for name, counts in [*sorted(by_category.items()), ("all", totals)]:
        print(f"| {name} | {' | '.join(str(counts[k]) for k in kinds)} |")


if __name__ == "__main__":
    main()
