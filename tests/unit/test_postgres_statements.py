"""The PostgreSQL store's statements as psycopg sees them, without a server."""

from __future__ import annotations

import hashlib

from psycopg import _queries

from tinyjobs.stores.postgres.sqlfiles import compose, migrations, queries

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


def test_the_cycle_function_is_the_text_migration_8_installs():
    # m008 composes queries.sql's settle (settle_body, tally, holder_host, the rules' texts),
    # cascade_pick and sqlfiles.COLUMNS (jcols: the claimed rows' columns, read by rows.py's
    # indices) into the function settle_claim, which an installed schema keeps as it was then:
    # a change to any of them changes a new schema's function and not an installed one's. When
    # this fails, add a migration that replaces settle_claim (CREATE OR REPLACE FUNCTION, or
    # DROP and CREATE when its columns change) so that every schema runs the new text, then
    # update the digest.
    text = compose(dict(migrations())[8], "tinyjobs")
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert digest == "26c0174d5459d23b6466cc020ca088ac887795d5247216680ec3f7bd1cd7a471"
