"""Parsing of durations ("10", "10s", "5m", "1h", "7d"), rates ("100/s") and sizes ("512MB")."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .errors import ConfigError

# The latest time tinyjobs holds: a day short of what `datetime` can hold, so that any time it
# keeps converts to a datetime in every time zone (stores hold far more: double seconds).
LATEST = datetime(9999, 12, 31, tzinfo=UTC).timestamp()

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*(ms|s|m|h|d)\s*$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    "b": 1,
    "kb": 1000,
    "kib": 1024,
    "mb": 1000**2,
    "mib": 1024**2,
    "gb": 1000**3,
    "gib": 1024**3,
}


def parse_duration(value: float | int | str | timedelta, what: str = "duration") -> float:
    """Seconds from a number, a `datetime.timedelta` or a string with a unit; `what` names the
    setting in errors. A duration past the latest time tinyjobs holds (LATEST) is refused."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        if seconds < 0:
            raise ConfigError(f"{what}: {value!r} must be a duration of zero or more")
        return _bounded(seconds, value, what)
    if isinstance(value, bool):
        raise ConfigError(f"{what}: expected a duration such as 10, '10s', '5m', '1h' or '7d', got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ConfigError(
                f"{what}: {value!r} is not a duration; use seconds or a number with a unit "
                "(ms, s, m, h, d, w), such as '10s', '5m', '1h', '7d'"
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    else:
        raise ConfigError(f"{what}: expected a duration, got {type(value).__name__}")
    if seconds < 0 or seconds != seconds or seconds == float("inf"):
        raise ConfigError(f"{what}: {value!r} must be a finite duration of zero or more")
    return _bounded(seconds, value, what)


def _bounded(seconds: float, value: object, what: str) -> float:
    if seconds > LATEST:
        raise ConfigError(f"{what}: {value!r} is longer than any time tinyjobs can hold (until 9999-12-31)")
    return seconds


def check_due(due: float, value: object, what: str) -> float:
    """`due` (epoch seconds) unless it is past LATEST, where ConfigError names `what`."""
    if due > LATEST:
        raise ConfigError(
            f"{what}: {value!r} puts the job after 9999-12-31, the latest time tinyjobs can hold"
        )
    return due


def until(moment: datetime, now: float, what: str) -> float:
    """Seconds from `now` (epoch) to the aware datetime `moment` (0 when it has passed)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ConfigError(
            f"{what}: must be an aware datetime (with a time zone), got naive {moment.isoformat()}"
        )
    return max(0.0, check_due(moment.timestamp(), moment, what) - now)


def parse_rate(value: str, what: str = "rate") -> tuple[int, float]:
    """(count, period in seconds) from '100/s', '10/m', '1000/h' or '5/10s'."""
    match = _RATE.match(value) if isinstance(value, str) else None
    if not match:
        raise ConfigError(f"{what}: {value!r} is not a rate; use 'N/s', 'N/m', 'N/h' or 'N/10s'")
    count = int(match.group(1))
    period = float(match.group(2) or 1) * _UNITS[match.group(3)]
    if count < 1 or period <= 0:
        raise ConfigError(f"{what}: {value!r} must allow at least one start in a positive period")
    return count, period


def parse_size(value: int | str, what: str = "size") -> int:
    """Bytes from a number or '512MB', '1MiB', '64kb'."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise ConfigError(f"{what}: {value!r} must be positive")
        return value
    match = _SIZE.match(value) if isinstance(value, str) else None
    if not match:
        raise ConfigError(f"{what}: {value!r} is not a size; use bytes or e.g. '512MB', '1MiB'")
    size = int(float(match.group(1)) * _SIZE_UNITS[(match.group(2) or "b").lower()])
    if size <= 0:
        raise ConfigError(f"{what}: {value!r} must be positive")
    return size
