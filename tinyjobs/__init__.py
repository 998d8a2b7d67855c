"""tinyjobs: a background-job queue for Python that never loses a job it acknowledged.

import tinyjobs
app = tinyjobs.App()          # $TINYJOBS_URL, else sqlite:///tinyjobs.db

@app.task(attempts=5)
def send(run: tinyjobs.Run, to: str) -> dict: ...

send.enqueue(to="a@example.com")
"""

from .app import App, QueueConfig
from .clock import FakeClock, SystemClock
from .errors import (
    ConfigError,
    DuplicateTask,
    JobNotFound,
    LeaseLost,
    NotSupported,
    PayloadTooLarge,
    SerializationError,
    StoreError,
    StoreUnavailable,
    TinyjobsError,
    UnknownTask,
)
from .job import Execution, Job
from .run import Outcome, Run
from .task import Task

__version__ = "0.1.0"

__all__ = [
    "App",
    "ConfigError",
    "DuplicateTask",
    "Execution",
    "FakeClock",
    "Job",
    "JobNotFound",
    "LeaseLost",
    "NotSupported",
    "Outcome",
    "PayloadTooLarge",
    "QueueConfig",
    "Run",
    "SerializationError",
    "StoreError",
    "StoreUnavailable",
    "SystemClock",
    "Task",
    "TinyjobsError",
    "UnknownTask",
    "__version__",
]
