"""Why a worker stops: one vocabulary for the worker that stops, the exit code of its process
and the supervisor that logs it (`worker.exited exit=recycle`)."""

from __future__ import annotations

from enum import StrEnum


class StopReason(StrEnum):
    """A worker's reason to stop; its value is what logs and health documents show."""

    STOPPED = "stopped"  # SIGTERM/SIGINT or a request: drained
    RECYCLE = "recycle"  # a sync handler ran past its timeout: replace the process (JOB-12)
    MAX_JOBS = "max-jobs"  # --max-jobs reached (SUP-07)
    ORPHANED = "orphaned"  # its supervisor died (SUP-05): leave without draining
    HARD_STOP = "hard-stop"  # a second signal: hand back every job now
