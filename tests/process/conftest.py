"""Process tests: real `tinyjobs worker` processes on a real SQLite file, real signals."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.processes import WorkerProcesses, import_app

HERE = Path(__file__).resolve().parent


@pytest.fixture
def workers(tmp_path):
    ws = WorkerProcesses(tmp_path, "procapp:app", HERE)
    yield ws
    ws.stop_all()


@pytest.fixture
def app(workers):
    app = import_app("procapp", HERE, workers.url)
    yield app
    app.close()
