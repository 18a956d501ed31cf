-- A batch's own rate-limit pool: the tokens its lines may use at most (each line's prompt bound and its
-- max_tokens), counted per tenant across its unfinished batches against `--batch-max-enqueued-tokens`.
ALTER TABLE batches ADD COLUMN enqueued_tokens BIGINT NOT NULL DEFAULT 0 CHECK (enqueued_tokens >= 0);
