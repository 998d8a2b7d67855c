"""The wheel ships tinyjobs.supervisor (from the repository's supervisor/ folder) and every SQL
and Lua file, and imports from outside the repository; imports flow one way."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return next(out.glob("tinyjobs-*.whl"))


def test_the_wheel_carries_the_supervisor_and_the_query_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "tinyjobs/supervisor/__init__.py" in names
    assert not any(n.startswith("supervisor/") for n in names)
    for folder, pattern in (("sqlite", ".sql"), ("postgres", ".sql"), ("redis", ".lua")):
        shipped = {n for n in names if n.startswith(f"tinyjobs/stores/{folder}/") and n.endswith(pattern)}
        in_repo = {
            f"tinyjobs/stores/{folder}/{p.name}"
            for p in (ROOT / "tinyjobs/stores" / folder).glob(f"*{pattern}")
        }
        assert shipped == in_repo


def test_the_wheel_imports_from_outside_the_repository(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = "import tinyjobs, tinyjobs.supervisor; print(tinyjobs.supervisor.__name__, tinyjobs.__file__)"
    done = subprocess.run(
        [sys.executable, "-P", "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tinyjobs.supervisor ") and str(target) in done.stdout


THIRD_PARTY_HOME = {
    "psycopg": "tinyjobs/stores/postgres",
    "redis": "tinyjobs/stores/redis",
    "croniter": "tinyjobs/cron.py",
    "click": "tinyjobs/cli",
    "setproctitle": "supervisor",
    "structlog": "tinyjobs/log.py",
}
LEAVES = ("job", "errors", "clock", "retry", "serialization", "durations", "urls", "holder")


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found.add(base)
    return found


def test_each_third_party_package_is_imported_in_one_place():
    for path in [*ROOT.glob("tinyjobs/**/*.py"), *ROOT.glob("supervisor/**/*.py")]:
        rel = path.relative_to(ROOT).as_posix()
        for name in imports_of(path):
            top = name.split(".")[0]
            if top in THIRD_PARTY_HOME:
                home = THIRD_PARTY_HOME[top]
                allowed = rel.startswith(home) or (top == "structlog" and rel == "tinyjobs/journald.py")
                assert allowed, f"{rel} imports {top}, which belongs in {home}"


def test_leaves_import_only_leaves_and_the_library_never_imports_the_supervisor():
    for leaf in LEAVES:
        for name in imports_of(ROOT / f"tinyjobs/{leaf}.py"):
            if name.startswith("."):
                assert name.lstrip(".") in LEAVES, f"leaf {leaf} imports {name}"
    for path in ROOT.glob("tinyjobs/**/*.py"):
        for name in imports_of(path):
            assert "supervisor" not in name or path.parent.name == "cli", f"{path} imports {name}"
    for name in ("worker", "reaper", "app", "execution", "drain"):
        for imported in imports_of(ROOT / f"tinyjobs/{name}.py"):
            assert not any(s in imported for s in ("stores.sqlite", "stores.postgres", "stores.redis"))


def test_the_stores_rules_are_a_leaf_every_store_may_import():
    """stores/rules.py imports at run time only leaves (and the standard library), so that each
    store, and nothing that it would pull in, can depend on it."""
    tree = ast.parse((ROOT / "tinyjobs/stores/rules.py").read_text())
    for node in tree.body:  # not inside `if TYPE_CHECKING:`
        if isinstance(node, ast.ImportFrom) and node.level:
            assert node.level == 2 and node.module in LEAVES, f"rules.py imports {node.module}"
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            assert all(n.split(".")[0] in sys.stdlib_module_names for n in names), names
