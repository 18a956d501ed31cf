-- Prompt caching (issue 15): a worker that reuses a cached prompt prefix reports how many of the prompt's
-- tokens it read from the cache, and those are billed at the model's cached-input price.

-- USD per million cached input tokens. Existing models get their input price: nothing becomes cheaper
-- until ops set a cached price. (The column is filled before it is made NOT NULL: one rewrite of a small
-- table.)
ALTER TABLE models ADD COLUMN cached_input_price_per_mtok NUMERIC(20, 10) CHECK (cached_input_price_per_mtok >= 0);
UPDATE models SET cached_input_price_per_mtok = input_price_per_mtok;
ALTER TABLE models ALTER COLUMN cached_input_price_per_mtok SET NOT NULL;

-- Of a record's input_tokens, those read from a cache: part of input_tokens, never more. Adding a column
-- with a constant default rewrites no row, so the append-only trigger (row-level, on UPDATE and DELETE)
-- does not fire; checking the constraint reads the rows without changing them. Inserts set it.
ALTER TABLE cost_records
    ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0,
    ADD CONSTRAINT cost_records_cached_tokens_bounds CHECK (cached_tokens >= 0 AND cached_tokens <= input_tokens);
