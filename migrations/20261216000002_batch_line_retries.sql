-- A line the fleet had no room for (every worker's queue full) or whose worker failed before answering
-- is tried again under a new request id (the attempt's own zero-cost record keeps the old one), not
-- before `not_before`; `attempts` counts the tries.
ALTER TABLE batch_lines
    ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    ADD COLUMN not_before TIMESTAMPTZ;
