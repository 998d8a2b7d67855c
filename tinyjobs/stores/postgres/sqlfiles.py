"""The SQL of the PostgreSQL store, read from the `.sql` files beside this module.

Statements are written with `{jobs}`-style placeholders, filled here with psycopg.sql so that
the schema name is always a quoted identifier, never pasted text; the texts of
tinyjobs/stores/rules.py (`{cancelled_while_running}`, ...) are filled in as literals, so that
the SQL reads them from their one home."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from psycopg import sql

from ...job import CANCELLED, FAILED, OUTCOME_CANCELLED
from .. import rules

# The job columns every snapshot query returns first, in this order (see rows.py).
COLUMNS = (
    "id",
    "task",
    "queue",
    "payload",
    "state",
    "priority",
    "attempts",
    "max_attempts",
    "due",
    "created_at",
    "started_at",
    "finished_at",
    "error",
    "result",
    "key",
    "grp",
    "after_ids",
    "cancel_requested",
    "seq",
)
TABLES = (
    "jobs",
    "executions",
    "steps",
    "deps",
    "cron",
    "leaders",
    "paused",
    "workers",
    "exec_stats",
    "exec_minutes",
)
_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def read(filename: str) -> str:
    return resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")


@cache
def blocks(filename: str = "queries.sql") -> dict[str, str]:
    """name -> statement text of each `-- name:` block of a file."""
    text = read(filename)
    parts = _NAME.split(text)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts), 2)}


@cache
def placeholders(schema: str) -> dict[str, sql.Composable]:
    """The values of the placeholders for one schema (built once per schema: compose runs for
    each of queries.sql's ~120 statements and fragments when a process opens the store, and
    rebuilding these each time was most of the ~20-40 ms that took). Callers must not change
    the dict."""
    values: dict[str, sql.Composable] = {name: sql.Identifier(schema, name) for name in TABLES}
    values["schema"] = sql.Identifier(schema)
    seq_name = sql.Identifier(schema, "job_seq").as_string(None)
    values["seq"] = sql.SQL("{}::regclass").format(sql.Literal(seq_name))
    values["cols"] = sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS)
    values["jcols"] = sql.SQL(", ").join(sql.Identifier("j", c) for c in COLUMNS)
    # The columns of claim_free's job row (m007), read from its composite column `claimed`.
    values["ccols"] = sql.SQL(", ").join(sql.SQL("(c.claimed).{}").format(sql.Identifier(c)) for c in COLUMNS)
    values.update(rule_values())
    return values


def rule_values() -> dict[str, sql.Composable]:
    """The placeholders of rules.py's texts: quoted literals (their printf-style `%s` read by
    SQL's format()), and `{execution_outcomes}`, the WHEN arms of `CASE <settlement outcome>`."""
    arms = " ".join(
        f"WHEN {_literal(outcome)} THEN {_literal(recorded)}"
        for outcome, recorded in rules.EXECUTION_OUTCOMES.items()
    )
    texts = {
        "cancelled_while_running": rules.CANCELLED_WHILE_RUNNING,
        "attempts_used": rules.ATTEMPTS_USED,
        "dependency_cancelled": rules.DEPENDENCY_CANCELLED,
        "reason_cancelled": rules.DEPENDENCY_REASONS[CANCELLED],
        "reason_failed": rules.DEPENDENCY_REASONS[FAILED],
        "outcome_cancelled": OUTCOME_CANCELLED,
    }
    values: dict[str, sql.Composable] = {k: sql.SQL(_literal(v)) for k, v in texts.items()}
    values["execution_outcomes"] = sql.SQL(arms)
    return values


def _literal(text: str) -> str:
    """`text` as an SQL string literal inside a statement that psycopg will read for its
    %(name)s parameters, so with every `%` doubled."""
    return sql.Literal(text).as_string(None).replace("%", "%%")


def without_comments(text: str) -> str:
    """`text` without its whole-line comments (they would be sent, and shown by
    pg_stat_statements, with the statement)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def compose(text: str, schema: str) -> str:
    """`text` with its placeholders filled for `schema`, as a string ready to execute. A
    placeholder that names a block of queries.sql (a fragment such as `{upsert_job}`) is
    replaced by that block, itself composed."""
    values: dict[str, sql.Composable] = dict(placeholders(schema))
    fragments = blocks()
    for name in _PLACEHOLDER.findall(text):
        if name in fragments and name not in values:
            values[name] = sql.SQL(compose(_strip_comments(fragments[name]), schema))
    wanted = {k: v for k, v in values.items() if "{" + k + "}" in text}
    return sql.SQL(text).format(**wanted).as_string(None)


def _strip_comments(text: str) -> str:
    """A fragment without its leading comment lines (they would end the line they land in)."""
    lines = text.splitlines()
    while lines and lines[0].lstrip().startswith("--"):
        lines.pop(0)
    return "\n".join(lines)


@cache
def queries(schema: str) -> dict[str, str]:
    """Every statement of queries.sql, composed for `schema`, without its comment lines and
    indentation (see `_compact`)."""
    return {name: _compact(compose(text, schema)) for name, text in blocks().items()}


def _compact(text: str) -> str:
    """`text` without its whole-line comments and each line's indentation. psycopg converts a
    statement's %(name)s placeholders anew at every execution when the statement is longer than
    4,096 bytes (its cache takes no longer ones): the settle statement, at 6 kB with its
    comments, cost the worker ~7 us per job in that conversion. No statement has a string
    literal spanning lines, which this would change."""
    lines = (line.strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("--"))


def migrations() -> list[tuple[int, str]]:
    """(version, file text) of every migration file `mNNN_*.sql`, oldest first."""
    found = []
    for entry in resources.files(__package__).iterdir():
        match = re.match(r"^m(\d{3})_\w+\.sql$", entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text(encoding="utf-8")))
    return sorted(found)
