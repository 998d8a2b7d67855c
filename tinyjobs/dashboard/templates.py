"""Jinja2 with autoescape on for every template: whatever the store holds (arguments, errors,
task, queue and step names) reaches the page as text, never as markup."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined


class Renderer:
    def __init__(self) -> None:
        self.env = Environment(
            loader=PackageLoader("tinyjobs.dashboard", "templates"),
            autoescape=True,  # every template, whatever its name
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(
            pretty=pretty, ago=ago, seconds=seconds, path=path_segment, query=query, short=short
        )

    def render(self, template: str, **context: Any) -> str:
        return self.env.get_template(template).render(**context)


def pretty(value: Any) -> str:
    """JSON as readable text (escaped by the template like any other text)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def ago(iso: str | None, now: datetime | None = None) -> str:
    """'12 s ago' / 'in 3 min' for an ISO time."""
    if not iso:
        return "—"
    when = datetime.fromisoformat(iso)
    delta = ((now or datetime.now(UTC)) - when).total_seconds()
    text = seconds(abs(delta))
    return f"{text} ago" if delta >= 0 else f"in {text}"


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    value = float(value)
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    if value < 172800:
        return f"{value / 3600:.1f} h"
    return f"{value / 86400:.1f} d"


def path_segment(value: str) -> str:
    """A job id or queue name as one URL path segment (a / in an id stays inside it)."""
    return quote(str(value), safe="")


def query(params: dict[str, Any], **changes: Any) -> str:
    """A query string from params with changes, dropping empty values."""
    merged = {**params, **changes}
    return urlencode({k: v for k, v in merged.items() if v not in (None, "")})


def short(value: str | None, limit: int = 120) -> str:
    """The last non-empty line of an error (where the exception is named), cut to `limit`."""
    if not value:
        return ""
    lines = [line for line in str(value).strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= limit else last[: limit - 1] + "…"
