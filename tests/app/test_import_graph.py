"""No import circle among the app's and the core's modules (issue 10).

Only imports that run when a module loads count (its top level, outside `if TYPE_CHECKING:`): an import
inside a function is how a module says it needs the other only at call time. A package's module that
imports its own package (`from . import records`) is no circle: the package is already loading.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("chatapp", "optimizer")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imported(name: str, path: Path, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return {t for t in targets if t in known and not name.startswith(t + ".")}


def _graph() -> dict[str, set[str]]:
    known = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        edges: set[str] = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges |= _imported(name, path, node, known)
        edges.discard(name)
        graph[name] = edges
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_finder_sees_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]


def test_the_graph_reads_the_real_imports():
    graph = _graph()
    assert "chatapp.chat.context" in graph["chatapp.chat.context_pack"]
    assert "optimizer.types" in graph["optimizer.packing"]  # relative: from .types import ...
    assert "chatapp.chat.imports.records" in graph["chatapp.chat.imports.chatgpt"]  # from . import records


def test_no_import_circle():
    assert _circles(_graph()) == []
