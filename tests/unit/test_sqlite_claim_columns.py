"""The SQLite claim's rows are read by position: the names the code reads them by and the
statement's RETURNING list must stay in step."""

from __future__ import annotations

from tinyjobs.stores.sqlite.rows import CLAIM_COLUMNS, Q


def returning(statement: str) -> tuple[str, ...]:
    """The names of a statement's RETURNING columns (each column's alias when it has one)."""
    listed = statement.split("RETURNING", 1)[1].split(",")
    return tuple(item.split(" AS ")[-1].strip() for item in listed)


def test_the_claim_returns_the_columns_in_the_order_they_are_read():
    assert returning(Q["claim"]) == CLAIM_COLUMNS
