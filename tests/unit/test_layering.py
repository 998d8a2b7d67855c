"""Imports flow one way: the components that run jobs (worker, drain, cron, execution) take the
small interfaces they use (tinyjobs.runtime.Runtime, cron.CronSource, task.Enqueuer) and never
import the App, not even for a type or lazily, so none of them is part of an import cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import tinyjobs

ROOT = Path(tinyjobs.__file__).parent
COMPONENTS = ("worker", "drain", "cron", "execution", "task", "runtime", "run", "reaper", "clock")


def import_graph() -> dict[str, set[str]]:
    """Module -> the tinyjobs modules it imports anywhere in its text (TYPE_CHECKING blocks and
    imports inside functions included)."""
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = ("tinyjobs", *path.relative_to(ROOT).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join([*base, *([node.module] if node.module else [])])
                found |= {
                    f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names
                }
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_components_that_run_jobs_never_import_the_app_or_their_importers():
    graph = import_graph()
    for component in COMPONENTS:
        name = f"tinyjobs.{component}"
        below = reachable(graph, name)
        assert "tinyjobs.app" not in below, f"{name} reaches tinyjobs.app through its imports"
        assert name not in below, f"{name} is part of an import cycle"
