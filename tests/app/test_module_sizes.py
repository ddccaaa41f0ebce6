"""The size limits the architecture keeps (issue 10, README "Architecture"): no Python module over 400
lines outside migrations and tests, no JavaScript module over 300. A module that grows past them
is the sign that it holds two concerns; this fails when one does, not a session later."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMITS = {".py": 400, ".js": 300}


def _tracked(suffix: str) -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", f"*{suffix}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in names]


def _counted(path: Path) -> bool:
    parts = path.relative_to(ROOT).parts
    return parts[0] != "tests" and "migrations" not in parts and "node_modules" not in parts


def test_no_module_over_its_limit():
    over = []
    for suffix, limit in LIMITS.items():
        files = [p for p in _tracked(suffix) if _counted(p)]
        assert files, f"no {suffix} files found: the listing is wrong"
        for path in files:
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                over.append(f"{path.relative_to(ROOT)}: {lines} lines (limit {limit})")
    assert over == []
