-- Stored responses (the Responses API's `store`, OpenAI's default): a tenant retrieves, deletes and
-- continues (`previous_response_id`) its own responses, never another tenant's. Each row keeps what a
-- continuation and `input_items` need, and its size, which the tenant's quota bounds.
CREATE TABLE stored_responses (
    -- `resp_…`, the answer's id and its cost record's.
    id                   TEXT PRIMARY KEY,
    tenant_id            UUID NOT NULL REFERENCES tenants(id),
    previous_response_id TEXT,
    -- `queued`, `in_progress`, `completed`, `incomplete`, `failed` or `cancelled`.
    status               TEXT NOT NULL CHECK (status IN ('queued', 'in_progress', 'completed', 'incomplete', 'failed', 'cancelled')),
    -- Run in the background (`background: true`): answered `queued` at once, polled, cancellable.
    background           BOOLEAN NOT NULL DEFAULT false,
    -- This request's input, as items with ids (`GET /v1/responses/{id}/input_items`).
    input_items          JSONB NOT NULL,
    -- The conversation a continuation starts from: every earlier turn's input and output items, this
    -- response's included (instructions are not carried over, as OpenAI does not).
    conversation         JSONB NOT NULL,
    -- The Response object as answered, cost included, byte for byte.
    response             TEXT NOT NULL,
    -- What the row costs the tenant's quota: its JSON text, in bytes.
    bytes                BIGINT NOT NULL CHECK (bytes >= 0),
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at           TIMESTAMPTZ NOT NULL
);

-- A tenant's stored bytes (the quota check) and the expiry sweep.
CREATE INDEX stored_responses_by_tenant ON stored_responses (tenant_id) INCLUDE (bytes, expires_at);
CREATE INDEX stored_responses_by_expiry ON stored_responses (expires_at);

-- A tenant's own storage terms, where they differ from the gateway's defaults
-- (`--responses-retention-hours`, `--responses-max-stored-bytes`).
CREATE TABLE response_storage_terms (
    tenant_id        UUID PRIMARY KEY REFERENCES tenants(id),
    retention_hours  INTEGER CHECK (retention_hours > 0),
    max_stored_bytes BIGINT CHECK (max_stored_bytes >= 0),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);
