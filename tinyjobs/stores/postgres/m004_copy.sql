-- tinyjobs PostgreSQL schema, version 4: the job sequence as seq's default, so that a bulk
-- enqueue through COPY (bulk.py) numbers its rows in stream order without naming the column.
ALTER TABLE {jobs} ALTER COLUMN seq SET DEFAULT nextval({seq});
