-- Tenants, their API keys, the model catalog and one cost record per request.
-- Money is NUMERIC (exact), never floating point.

CREATE TABLE tenants (
    id          UUID PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A key is `rk-<public_id>-<secret>`. Only the SHA-256 of the secret is stored; the public id finds the
-- row, and the hash is compared in constant time.
CREATE TABLE api_keys (
    id           UUID PRIMARY KEY,
    tenant_id    UUID NOT NULL REFERENCES tenants(id),
    public_id    TEXT NOT NULL UNIQUE,
    secret_hash  BYTEA NOT NULL CHECK (length(secret_hash) = 32),
    name         TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at   TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

-- The catalog. Prices are per million tokens.
CREATE TABLE models (
    id                      TEXT PRIMARY KEY,
    owned_by                TEXT NOT NULL DEFAULT 'runaii',
    context_length          INTEGER NOT NULL CHECK (context_length > 0),
    input_price_per_mtok    NUMERIC(20, 10) NOT NULL CHECK (input_price_per_mtok >= 0),
    output_price_per_mtok   NUMERIC(20, 10) NOT NULL CHECK (output_price_per_mtok >= 0),
    enabled                 BOOLEAN NOT NULL DEFAULT true,
    supports_structured_outputs BOOLEAN NOT NULL DEFAULT true,
    supports_tools          BOOLEAN NOT NULL DEFAULT false,
    -- Render the schema's names and descriptions into the prompt for json_schema requests.
    schema_in_prompt        BOOLEAN NOT NULL DEFAULT true,
    created_at              TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Workers known by configuration (the live ones also announce themselves in Redis).
CREATE TABLE model_workers (
    model_id    TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
    url         TEXT NOT NULL,
    PRIMARY KEY (model_id, url)
);

-- One row per request, written before the response completes. Append-only.
CREATE TABLE cost_records (
    request_id      TEXT PRIMARY KEY,
    tenant_id       UUID NOT NULL REFERENCES tenants(id),
    api_key_id      UUID NOT NULL REFERENCES api_keys(id),
    model           TEXT NOT NULL,
    endpoint        TEXT NOT NULL,
    input_tokens    INTEGER NOT NULL CHECK (input_tokens >= 0),
    output_tokens   INTEGER NOT NULL CHECK (output_tokens >= 0),
    cost            NUMERIC(30, 16) NOT NULL CHECK (cost >= 0),
    status          TEXT NOT NULL CHECK (status IN ('succeeded', 'failed', 'rejected', 'cancelled')),
    http_status     INTEGER NOT NULL,
    error_code      TEXT,
    latency_ms      INTEGER NOT NULL CHECK (latency_ms >= 0),
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX cost_records_tenant_time ON cost_records (tenant_id, created_at);
