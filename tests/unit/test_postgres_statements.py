"""The PostgreSQL store's statements as psycopg sees them, without a server."""

from __future__ import annotations

from psycopg import _queries

from tinyjobs.stores.postgres.sqlfiles import queries

# A schema name as long as PostgreSQL allows (63 bytes): every statement names it several times.
LONGEST_SCHEMA = "s" * 63


def test_every_statement_fits_psycopgs_statement_cache():
    # psycopg converts a longer statement's %(name)s placeholders anew at every execution (its
    # cache skips it): at 6 kB the settle statement cost the worker ~7 us per job so.
    limit = _queries.MAX_CACHED_STATEMENT_LENGTH
    long = {name: len(text.encode()) for name, text in queries(LONGEST_SCHEMA).items()}
    assert {name: n for name, n in long.items() if n > limit} == {}


def test_statements_keep_no_comment_lines():
    for name, text in queries("tinyjobs").items():
        assert not [line for line in text.splitlines() if line.lstrip().startswith("--")], name
