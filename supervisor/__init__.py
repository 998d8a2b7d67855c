"""The pre-fork supervisor behind `tinyjobs supervise`, shipped as `tinyjobs.supervisor`.

It knows processes, not jobs: it forks workers (tinyjobs.worker.Worker), replaces the ones that
die, drains them on SIGTERM, runs the leader's duties (reaper, cron, purge), answers health
probes on a Unix socket and speaks sd_notify. See docs/operations.md."""

# The repository folder is `supervisor/`; installed, it is `tinyjobs.supervisor`. Imported under
# any other name (the repository root on sys.path), it would shadow supervisord's package.
if __name__ != "tinyjobs.supervisor":
    raise ImportError(
        f"this package must be imported as tinyjobs.supervisor, not {__name__!r}: the "
        "repository folder is on sys.path (run plain `pytest`, not `python -m pytest`)"
    )

from .arbiter import Arbiter
from .config import SupervisorConfig

__all__ = ["Arbiter", "SupervisorConfig"]
