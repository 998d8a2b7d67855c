"""Rules that every store's dashboard operations share: checking a browse request, the browse
cursor's encoding, text search, series buckets, duration buckets and worker liveness. Pure
functions, so that the four stores cannot disagree on them."""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import math
from collections.abc import Sequence
from dataclasses import replace

from ..errors import ConfigError
from ..job import SCHEDULED, STATES, WAITING
from .base import BROWSE_MAX, ExecutionStats, JobFilter, WorkerBeat

LOST_FACTOR = 10  # a worker silent for more than `within` is lost; past this many times, dropped


def check_browse(filter: JobFilter, limit: int) -> None:
    """Raise ConfigError naming what is wrong in a browse request."""
    if filter.state is not None and filter.state not in STATES:
        raise ConfigError(f"state {filter.state!r} is not one of {', '.join(STATES)}")
    if not isinstance(limit, int) or not 1 <= limit <= BROWSE_MAX:
        raise ConfigError(f"limit {limit!r} must be a whole number from 1 to {BROWSE_MAX}")


def stored_state(state: str | None) -> tuple[str | None, str | None]:
    """(stored state, due split) of a reported state: scheduled and waiting are both stored
    `pending`, told apart by their due time against now."""
    if state in (SCHEDULED, WAITING):
        return "pending", state
    return state, None


def encode_cursor(created_at: float, job_id: str) -> str:
    """The opaque cursor after the row (created_at, id): URL-safe text."""
    raw = json.dumps([float(created_at).hex(), job_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """(created_at, id) of a cursor from encode_cursor; ConfigError for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, job_id = json.loads(raw)
        value = float.fromhex(stamp)
        if not isinstance(job_id, str) or not math.isfinite(value):
            raise ValueError
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise ConfigError(f"cursor {cursor[:40]!r} is not one that browse returned") from None
    return value, job_id


SEQ_MARK = "seq"  # the id part of a cursor of a browse by seq: it names a seq, not a (created_at, id)


def seq_cursor(seq: int) -> str:
    """The cursor of the rows below `seq` (SQLite and PostgreSQL browse by seq)."""
    return encode_cursor(float(seq), SEQ_MARK)


def seq_of(cursor: str) -> int:
    """The seq of a cursor from seq_cursor; ConfigError for any other."""
    value, mark = decode_cursor(cursor)
    if mark != SEQ_MARK or value != int(value):
        raise ConfigError(f"cursor {cursor[:40]!r} is not one that browse returned")
    return int(value)


def like_pattern(text: str) -> str:
    """`text` with LIKE's wildcards escaped (ESCAPE '\\'), for a substring or prefix match."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def text_matches(text: str, job_id: str, payload: str, error: str | None) -> bool:
    """JobFilter.text: the id starts with it, or the arguments' JSON or the error contain it."""
    return job_id.startswith(text) or text in payload or (error is not None and text in error)


def bucket_start(ended_at: float, since: float, step: float) -> float:
    """The start of the `step`-second bucket, counted from `since`, that holds `ended_at`."""
    return since + math.floor((ended_at - since) / step) * step


def check_series(since: float, step: float) -> None:
    if not step > 0:
        raise ConfigError(f"step {step!r} must be a positive number of seconds")
    if not math.isfinite(since):
        raise ConfigError(f"since {since!r} must be an epoch time in seconds")


def cumulative(durations: Sequence[float], bounds: Sequence[float]) -> tuple[int, ...]:
    """Cumulative counts of `durations` at or under each bound (Prometheus `le` buckets)."""
    ordered = sorted(durations)
    return tuple(bisect.bisect_right(ordered, bound) for bound in bounds)


def check_bounds(bounds: Sequence[float]) -> list[float]:
    values = [float(b) for b in bounds]
    if any(b > a for a, b in zip(values[1:], values, strict=False)):
        raise ConfigError(f"bucket bounds {values!r} must be ascending")
    return values


def liveness(beat: WorkerBeat, within: float, now: float) -> WorkerBeat | None:
    """The beat as `workers` reports it: live, lost (silent past `within`), or None once it was
    silent past LOST_FACTOR x `within` (dropped)."""
    silent = now - beat.seen_at
    if silent > LOST_FACTOR * within:
        return None
    if silent > within:
        return replace(beat, lost=True)
    return replace(beat, lost=False)


def check_queue(queue: str) -> None:
    if not isinstance(queue, str) or not queue:
        raise ConfigError(f"queue name {queue!r} must be a non-empty string")


def gather_stats(rows: Sequence[Sequence], nbounds: int) -> list[ExecutionStats]:
    """ExecutionStats from rows of (queue, outcome, bucket index, count, seconds), where the
    index is that of the first bound the duration fits under (nbounds when none)."""
    found: dict[tuple[str, str], tuple[int, float, list[int]]] = {}
    for queue, outcome, le, number, seconds in rows:
        count, total, per = found.get((queue, outcome), (0, 0.0, [0] * (nbounds + 1)))
        per[int(le)] += int(number)
        found[(queue, outcome)] = (count + int(number), total + float(seconds or 0.0), per)
    out = []
    for (queue, outcome), (count, total, per) in sorted(found.items()):
        running, cumulative = 0, []
        for n in per[:nbounds]:
            running += n
            cumulative.append(running)
        out.append(ExecutionStats(queue, outcome, count, total, tuple(cumulative)))
    return out
