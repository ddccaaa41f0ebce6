"""Shared helpers for the bench scripts: offline tiktoken, a deterministic conversation generator, stats.

Run the scripts from the repository root (`.venv/bin/python bench/<name>.py`); this module puts the
root on sys.path so `import optimizer` works without installing the package.
"""

from __future__ import annotations

import importlib.util
import os
import random
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def offline_tiktoken() -> None:
    """Point tiktoken at the encodings litellm's wheel ships (no network), unless the user chose a cache."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return
    spec = importlib.util.find_spec("litellm")
    if spec and spec.submodule_search_locations:
        os.environ["TIKTOKEN_CACHE_DIR"] = os.path.join(
            spec.submodule_search_locations[0], "litellm_core_utils", "tokenizers"
        )


def encoding(model: str = "gpt-4o-mini") -> Any:
    offline_tiktoken()
    import tiktoken

    try:
        return tiktoken.encoding_for_model(model)
    except KeyError:
        return tiktoken.get_encoding("o200k_base")


# --- deterministic synthetic conversations -------------------------------------------------------------

_TOPICS = ["Postgres", "Redis", "nginx", "Celery", "Kafka", "Terraform", "Kubernetes", "Django", "React", "gRPC",
           "sourdough", "bouldering", "watercolor", "trail running", "film photography", "beekeeping"]
_ERRORS = ["connection reset by peer", "timeout after 30s", "permission denied", "out of memory",
           "certificate expired", "too many open files", "deadlock detected", "disk quota exceeded"]
_NAMES = ["Ingrid", "Tomasz", "Priya", "Mateo", "Yuki", "Amara", "Lars", "Noor", "Felix", "Zofia"]
_USER = [
    "Can you explain how {t} handles '{e}' under heavy load?",
    "We deployed build {n} yesterday and {t} started failing with '{e}'. What should I check first?",
    "My colleague {p} thinks we should drop {t}. What are the trade-offs for a team of {k}?",
    "Thanks, that helped. One more thing: how do I monitor {t} so this does not happen again?",
    "Could you rewrite that as a short checklist?",
    "I set max_connections to {n} but still see '{e}'. Is that value too high?",
    "What is a sensible weekly plan for getting better at {t}?",
    "Ok. And if the error comes back after {k} hours, what then?",
]
_ASSISTANT = [
    "With {t}, the usual causes of '{e}' are resource limits, slow clients and misconfigured timeouts. "
    "Start with the metrics around the time of the error and compare them with a quiet period.",
    "If the pattern repeats at peak traffic, raise the limits gradually and watch the effect rather than "
    "changing several settings at once. Keep a log of each change with the time and the value, here {n}.",
    "For a team of {k}, operational burden matters more than raw capability: pick the tool your team can "
    "debug at 3 a.m. {p} has a point if nobody on the team knows {t} well.",
    "Checklist: reproduce the error, capture the exact message ('{e}'), check recent deploys and config "
    "changes, look at resource graphs, test with a minimal client, then change one setting at a time.",
    "A value of {n} is plausible, but every connection costs memory. Measure the resident size per "
    "connection first; a pooler in front usually helps more than a bigger limit.",
    "Set alerts on the saturation metrics, not only on errors: by the time '{e}' shows up, the queue has "
    "usually been growing for a while. A dashboard with p95 latency and queue depth catches it early.",
]
_CODE = (
    "```python\nimport time\n\n\ndef retry(fn, attempts={k}, delay=0.{k}):\n"
    "    for i in range(attempts):\n        try:\n            return fn()\n"
    "        except OSError as exc:  # {e}\n            time.sleep(delay * 2 ** i)\n"
    "    raise RuntimeError('gave up after {k} attempts')\n```"
)


def _fill(rng: random.Random, template: str) -> str:
    return template.format(t=rng.choice(_TOPICS), e=rng.choice(_ERRORS), p=rng.choice(_NAMES),
                           n=rng.randint(10, 99999), k=rng.randint(2, 12))


def _log_paste(rng: random.Random, lines: int) -> str:
    out = ["Here is the log from last night:", "```"]
    for i in range(lines):
        out.append(f"2026-03-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{i % 60:02d}Z "
                   f"{rng.choice(['INFO', 'WARN', 'ERROR'])} worker-{rng.randint(1, 16)} {rng.choice(_ERRORS)} "
                   f"req={rng.randint(100000, 999999)}")
    out.append("```")
    return "\n".join(out)


def make_conversation(n_messages: int, *, seed: int = 0, pin_every: int = 0) -> list[dict[str, Any]]:
    """A system prompt, then alternating user/assistant messages; deterministic for (n_messages, seed).

    Content mimics a help-desk chat: short questions, replies of one to four paragraphs, an occasional
    code block and, about once in 60 messages, a pasted log of 20-120 lines. Average ~75 tokens/message.
    `pin_every` > 0 pins every n-th user message.
    """
    rng = random.Random(f"conv-{n_messages}-{seed}")
    msgs: list[dict[str, Any]] = [{"id": "m0", "role": "system", "pinned": False,
                                   "content": "You are a helpful assistant for a small engineering team."}]
    for i in range(1, n_messages):
        role = "user" if i % 2 == 1 else "assistant"
        if role == "user":
            if rng.random() < 1 / 30:
                content = _log_paste(rng, rng.randint(20, 120))
            else:
                content = " ".join(_fill(rng, rng.choice(_USER)) for _ in range(rng.randint(1, 2)))
        else:
            parts = [_fill(rng, rng.choice(_ASSISTANT)) for _ in range(rng.randint(1, 4))]
            if rng.random() < 0.08:
                parts.insert(1, _fill(rng, _CODE))
            content = "\n\n".join(parts)
        pinned = bool(pin_every) and role == "user" and (i // 2) % pin_every == pin_every - 1
        msgs.append({"id": f"m{i}", "role": role, "content": content, "pinned": pinned})
    return msgs


def chat_count(enc: Any, role: str, content: str) -> int:
    """OpenAI cookbook per-message count: 3 + role + content (reply priming, +3, is added per request)."""
    return 3 + len(enc.encode_ordinary(role)) + len(enc.encode_ordinary(content))


# --- stats --------------------------------------------------------------------------------------------

def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); with few samples p95 is simply the slowest run."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(p / 100 * len(s) + 0.5) - 1))
    return s[k]


def load_note() -> str:
    """Load average and core count, printed beside timings: other jobs on the machine inflate wall time."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"load average {load:.1f} on {os.cpu_count()} CPUs"


def median(values: list[float]) -> float:
    return statistics.median(values)


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1000
    if ms < 10:
        return f"{ms:.3f}"
    if ms < 1000:
        return f"{ms:.1f}"
    return f"{ms:,.0f}"


@contextmanager
def revision_tree(rev: str) -> Iterator[Path]:
    """A temporary git worktree of `rev` beside this checkout, using this checkout's .venv; removed on
    exit. For the benches that measure two commits side by side (`--compare REV`)."""
    with tempfile.TemporaryDirectory(prefix="bench-rev-") as folder:
        tree = Path(folder) / "rev"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            (tree / ".venv").symlink_to(ROOT / ".venv")
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
