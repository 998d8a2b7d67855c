"""The supervisor's settings, validated once at boot, and the exit codes it promises."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from tinyjobs.durations import parse_duration, parse_size
from tinyjobs.errors import ConfigError
from tinyjobs.stop import StopReason

# Exit codes of `tinyjobs supervise` (docs/operations.md). systemd's unit lists 2 and 3 in
# RestartPreventExitStatus=, so a boot error stops instead of looping.
EXIT_OK = 0  # drained (or stopped now) on request
EXIT_CRASH = 1  # the supervisor itself failed unexpectedly
EXIT_USAGE = 2  # bad options
EXIT_BOOT = 3  # the app cannot be loaded, or a worker failed to boot

# Exit codes of a worker process, so the supervisor can log why it left.
CHILD_EXIT = {
    StopReason.STOPPED: 0,
    StopReason.RECYCLE: 75,
    StopReason.MAX_JOBS: 76,
    StopReason.ORPHANED: 78,
    StopReason.HARD_STOP: 79,
}
CHILD_BOOT_ERROR = EXIT_BOOT
CHILD_REASONS = {code: reason for reason, code in CHILD_EXIT.items()}

DEFAULT_HEARTBEAT_TIMEOUT = 30.0
DEFAULT_LEADER_TTL = 10.0
DEFAULT_DRAIN = 30.0


class BootError(Exception):
    """The supervisor cannot start: a clear message, and exit status `code` (no respawn)."""

    def __init__(self, message: str, code: int = EXIT_BOOT) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class SupervisorConfig:
    """Everything `tinyjobs supervise` was asked for. Build it with `from_options`."""

    app_spec: str
    url: str | None = None
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    slots: int = 8
    queues: list[str] | None = None
    socket_path: str | None = None
    drain_timeout: float = DEFAULT_DRAIN
    max_jobs: int | None = None
    max_memory: int | None = None  # bytes of RSS
    heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT
    leader_ttl: float = DEFAULT_LEADER_TTL
    jitter: float = 0.1  # recycle limits grow by up to this fraction, at random, per worker

    @property
    def heartbeat_interval(self) -> float:
        """How often a worker reports: often enough that four reports fit in the timeout, and
        at most every 2 s (each report wakes the supervisor: at 1 s, two idle workers woke it
        twice a second for reports no one needed sooner)."""
        return max(0.05, min(2.0, self.heartbeat_timeout / 4))

    @classmethod
    def from_options(
        cls,
        app_spec: str,
        *,
        url: str | None = None,
        workers: int | None = None,
        slots: int = 8,
        queues: str | None = None,
        socket_path: str | None = None,
        drain_timeout: str | float = DEFAULT_DRAIN,
        max_jobs: int | None = None,
        max_memory: str | int | None = None,
        heartbeat_timeout: str | float = DEFAULT_HEARTBEAT_TIMEOUT,
        leader_ttl: str | float = DEFAULT_LEADER_TTL,
    ) -> SupervisorConfig:
        """Validate the options; BootError(code=EXIT_USAGE) naming the culprit otherwise."""
        try:
            config = cls(
                app_spec=app_spec,
                url=url,
                workers=workers if workers is not None else (os.cpu_count() or 1),
                slots=slots,
                queues=_names(queues),
                socket_path=socket_path or default_socket_path(),
                drain_timeout=parse_duration(drain_timeout, "--drain-timeout"),
                max_jobs=max_jobs,
                max_memory=None if max_memory in (None, "") else parse_size(max_memory, "--max-memory"),
                heartbeat_timeout=parse_duration(heartbeat_timeout, "--heartbeat-timeout"),
                leader_ttl=parse_duration(leader_ttl, "--leader-ttl"),
            )
            config.validate()
        except ConfigError as err:
            raise BootError(str(err), EXIT_USAGE) from None
        return config

    def validate(self) -> None:
        """ConfigError for a setting that makes no sense."""
        if self.workers < 1 or self.slots < 1:
            raise ConfigError("--workers and --slots must be at least 1")
        if self.max_jobs is not None and self.max_jobs < 1:
            raise ConfigError("--max-jobs must be at least 1")
        if self.heartbeat_timeout < 0.2:
            raise ConfigError("--heartbeat-timeout must be at least 0.2 s")
        if self.leader_ttl < 1:
            raise ConfigError("--leader-ttl must be at least 1 s")
        if self.drain_timeout < 0:
            raise ConfigError("--drain-timeout must not be negative")


def default_socket_path() -> str | None:
    """$RUNTIME_DIRECTORY/health.sock (systemd's RuntimeDirectory=), else no socket."""
    runtime = os.environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
    return os.path.join(runtime, "health.sock") if runtime else None


def _names(queues: str | None) -> list[str] | None:
    names = [q.strip() for q in (queues or "").split(",") if q.strip()]
    return names or None
