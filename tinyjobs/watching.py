"""What a watcher of one job yields, decided apart from how it reads the job, so that
`App.watch` (sync) and `App.awatch` (asyncio) follow the same rules."""

from __future__ import annotations

from .job import CANCELLED, FINAL_STATES, Job

# The fields whose change makes a new snapshot worth yielding.
WATCHED = ("state", "attempts", "error", "result", "ahead", "due_at", "cancel_requested")


class Watching:
    """One watch's memory: `see(job)` after each read returns the snapshot to yield (or None),
    and `done` turns True at a final state. A job that disappears while not final was
    cancelled while waiting: one last `cancelled` snapshot (seed 000: a state only a watcher
    sees)."""

    def __init__(self) -> None:
        self.last: Job | None = None
        self.done = False

    def see(self, job: Job | None) -> Job | None:
        if job is None:
            self.done = True
            last = self.last
            if last is not None and last.state not in FINAL_STATES:
                last.state, last.ahead = CANCELLED, None
                return last
            return None
        fresh = self.last is None or any(getattr(self.last, k) != getattr(job, k) for k in WATCHED)
        if fresh:
            self.last = job
        self.done = job.state in FINAL_STATES
        return job if fresh else None
