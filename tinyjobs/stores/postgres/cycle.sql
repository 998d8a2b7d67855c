-- The worker's cycle sent through libpq directly (cycle.py): queries.sql's settle_claim with
-- libpq's $n parameters, prepared once per connection. {schema}-style placeholders as in
-- queries.sql.

-- name: settle_claim
-- Parameters: $1-$7 the settlements' arrays (ids, tokens, outcomes, results, errors, delays,
-- executions), $8 the queues, $9 their leases, $10 the free queues, $11 the limit, $12 the
-- holder, $13 now (NULL: the transaction's), $14 the schema. Its rows: see m008.
SELECT * FROM {schema}.settle_claim($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
    $6::float8[], $7::text[], $8::text[], $9::float8[], $10::text[], $11::int, $12::text,
    $13::float8, $14::text)
