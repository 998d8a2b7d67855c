"""The package is typed (py.typed): `@app.task` gives a Task[P, R] whose enqueue and aenqueue
mypy checks against the handler's parameters after the Run, with the enqueue options named.
One mypy run over two files: typed_ok.py must pass under --strict; every line of
typed_wrong.py marked `# rejected: CODE` must be reported with that code, and nothing else."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.services import require_module

HERE = Path(__file__).resolve().parent / "typing_examples"
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_mypy_checks_enqueue_against_the_handlers_parameters(tmp_path):
    require_module("mypy")
    ok, wrong = HERE / "typed_ok.py", HERE / "typed_wrong.py"
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--show-error-codes",
            "--follow-imports=silent",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--config-file",
            os.devnull,
            str(ok),
            str(wrong),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    found = set()
    for line in proc.stdout.splitlines():
        match = re.match(r"^(.*?):(\d+): error: .*\[([\w-]+)\]$", line)
        if match:
            found.add((Path(match.group(1)).name, int(match.group(2)), match.group(3)))
    expected = set()
    for number, text in enumerate(wrong.read_text().splitlines(), start=1):
        marker = re.search(r"# rejected: ([a-z-]+)$", text)
        if marker:
            expected.add(("typed_wrong.py", number, marker.group(1)))
    assert expected and found == expected, proc.stdout
