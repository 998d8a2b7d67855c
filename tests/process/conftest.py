"""Process tests: real `tinyjobs worker` processes on a real SQLite file, real signals."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.processes import WorkerProcesses, import_app

HERE = Path(__file__).resolve().parent


@pytest.fixture
def app_module() -> str:
    """The test app (a module beside this file) the workers run; a test file overrides it."""
    return "procapp"


@pytest.fixture
def workers(tmp_path, app_module):
    ws = WorkerProcesses(tmp_path, f"{app_module}:app", HERE)
    yield ws
    ws.stop_all()


@pytest.fixture
def app(workers, app_module):
    app = import_app(app_module, HERE, workers.url)
    yield app
    app.close()
