"""`tinyjobs verify URL`: the runner (runner.py) starts a fleet of real worker processes
(fleet.py, each running worker.py), sends jobs while it kills workers, and accounts for every job
against the ledger the workers wrote (ledger.py, report.py); settings.py checks what it was asked."""

from __future__ import annotations

from .runner import run_cli
from .settings import Refused, settings

__all__ = ["Refused", "run_cli", "settings"]
