"""CI's type check, .ci/mypy, checks the package as it installs: every module of tinyjobs/, of
supervisor/ (as tinyjobs.supervisor, through the package-dir mapping) and of examples/, with
no finding at the configured strictness (pyproject.toml [tool.mypy])."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.services import require_module

ROOT = Path(__file__).resolve().parents[2]


def _sources() -> list[Path]:
    return [
        path
        for folder in ("tinyjobs", "supervisor", "examples")
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    ]


@pytest.mark.slow
def test_ci_mypy_is_clean_over_the_package_with_the_supervisor_in_it(tmp_path):
    require_module("mypy")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [str(ROOT / ".ci" / "mypy"), "--cache-dir", str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checked = re.search(r"Success: no issues found in (\d+) source files", proc.stdout)
    assert checked, proc.stdout
    # The supervisor's modules are among those checked: the count is every source file.
    assert int(checked.group(1)) == len(_sources()), proc.stdout
    assert any(path.parent.name == "supervisor" for path in _sources())
