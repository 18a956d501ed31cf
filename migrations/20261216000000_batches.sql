-- The Batch API (`/v1/batches`): a tenant's file of requests run on capacity online traffic leaves free,
-- at the model's batch price, each line once, with one file of answers and one of errors at the end.

-- A batch line's price is the model's online price times this ratio (ops set it per model; half by
-- default, as OpenAI and Anthropic price their batches).
ALTER TABLE models ADD COLUMN batch_price_ratio NUMERIC(5, 4) NOT NULL DEFAULT 0.5
    CHECK (batch_price_ratio > 0 AND batch_price_ratio <= 1);

CREATE TABLE batches (
    -- `batch_…`.
    id                TEXT PRIMARY KEY,
    tenant_id         UUID NOT NULL REFERENCES tenants(id),
    -- The key that created it: its lines are billed to it, as its own requests would be.
    api_key_id        UUID NOT NULL REFERENCES api_keys(id),
    -- `/v1/chat/completions` or `/v1/responses`: every line's `url`.
    endpoint          TEXT NOT NULL,
    input_file_id     TEXT NOT NULL,
    completion_window TEXT NOT NULL,
    metadata          JSONB,
    status            TEXT NOT NULL CHECK (status IN ('validating', 'failed', 'in_progress', 'finalizing', 'completed',
                                                      'expired', 'cancelling', 'cancelled')),
    -- Why validation failed: OpenAI's `errors` object (`{"object": "list", "data": [...]}`).
    errors            JSONB,
    output_file_id    TEXT,
    error_file_id     TEXT,
    -- Lines run, in turn, across batches: the one claimed from longest ago goes next.
    last_claim_at     TIMESTAMPTZ,
    -- Validating and finalizing are one replica's work at a time: until then no other takes it (a replica
    -- that died leaves it to the next after this time).
    leased_until      TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at        TIMESTAMPTZ NOT NULL,
    in_progress_at    TIMESTAMPTZ,
    finalizing_at     TIMESTAMPTZ,
    completed_at      TIMESTAMPTZ,
    failed_at         TIMESTAMPTZ,
    expired_at        TIMESTAMPTZ,
    cancelling_at     TIMESTAMPTZ,
    cancelled_at      TIMESTAMPTZ
);
CREATE INDEX batches_by_tenant ON batches (tenant_id, created_at DESC, id DESC);
CREATE INDEX batches_active ON batches (status) WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

-- One request of a batch. `request_id` is fixed when the line is read: the answer's id and its cost
-- record's, so a line run again after its gateway died is billed at most once (the cost record's key).
CREATE TABLE batch_lines (
    batch_id     TEXT NOT NULL REFERENCES batches(id) ON DELETE CASCADE,
    -- Its place in the input, from 0.
    line         INTEGER NOT NULL CHECK (line >= 0),
    custom_id    TEXT NOT NULL,
    request_id   TEXT NOT NULL UNIQUE,
    body         JSONB NOT NULL,
    -- `pending`, `running` (on the replica `claimed_by`), then `succeeded` (a 2xx answer), `failed` (an
    -- error answer), `cancelled` or `expired` (never run).
    state        TEXT NOT NULL CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'cancelled', 'expired')),
    claimed_by   UUID,
    claimed_at   TIMESTAMPTZ,
    -- The answer: its HTTP status and body, as the endpoint would have answered it.
    status_code  INTEGER,
    response     TEXT,
    PRIMARY KEY (batch_id, line)
);
CREATE INDEX batch_lines_pending ON batch_lines (batch_id, line) WHERE state = 'pending';
CREATE INDEX batch_lines_running ON batch_lines (claimed_by) WHERE state = 'running';
