-- Credits, rate limits per key, idempotency, model access per tenant, and the audit log.

-- A tenant's balance changes only through `credit_ledger` (grants by admins, charges by requests), in the
-- same transaction as the entry. `reserved` is the sum of the open holds in `credit_holds`: what requests
-- in flight may still cost. Neither can go below zero, and what is reserved never exceeds the balance, so
-- no interleaving of requests can overdraw a tenant.
ALTER TABLE tenants
    ADD COLUMN balance  NUMERIC(30, 16) NOT NULL DEFAULT 0,
    ADD COLUMN reserved NUMERIC(30, 16) NOT NULL DEFAULT 0,
    ADD CONSTRAINT tenants_reserved_nonnegative CHECK (reserved >= 0),
    ADD CONSTRAINT tenants_no_overdraw CHECK (balance >= reserved);

CREATE TABLE credit_ledger (
    id          BIGSERIAL PRIMARY KEY,
    tenant_id   UUID NOT NULL REFERENCES tenants(id),
    kind        TEXT NOT NULL CHECK (kind IN ('grant', 'charge')),
    -- Signed: a grant adds (an adjustment may be negative), a charge subtracts.
    amount      NUMERIC(30, 16) NOT NULL,
    -- The request a charge settles; one charge per request.
    request_id  TEXT UNIQUE REFERENCES cost_records(request_id),
    actor       TEXT,
    note        TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    CHECK ((kind = 'charge') = (request_id IS NOT NULL)),
    CHECK (kind <> 'charge' OR amount < 0)
);
CREATE INDEX credit_ledger_tenant_time ON credit_ledger (tenant_id, created_at);

-- The worst-case cost of each request in flight, taken at admission and released when it settles.
CREATE TABLE credit_holds (
    request_id  TEXT PRIMARY KEY,
    tenant_id   UUID NOT NULL REFERENCES tenants(id),
    amount      NUMERIC(30, 16) NOT NULL CHECK (amount >= 0),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX credit_holds_time ON credit_holds (created_at);

-- Per-key limits; NULL means the gateway's configured default.
ALTER TABLE api_keys
    ADD COLUMN rpm_limit INTEGER CHECK (rpm_limit > 0),
    ADD COLUMN tpm_limit INTEGER CHECK (tpm_limit > 0);

-- A private model is listed and served only to the tenants granted it.
ALTER TABLE models ADD COLUMN public BOOLEAN NOT NULL DEFAULT true;
CREATE TABLE model_access (
    tenant_id   UUID NOT NULL REFERENCES tenants(id),
    model_id    TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
    PRIMARY KEY (tenant_id, model_id)
);

-- `Idempotency-Key`: the first request with a key runs; a retry with the same body gets the stored answer.
CREATE TABLE idempotency_keys (
    tenant_id     UUID NOT NULL REFERENCES tenants(id),
    key           TEXT NOT NULL,
    -- SHA-256 of the endpoint and the body as sent.
    request_hash  BYTEA NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('running', 'done')),
    http_status   INTEGER,
    content_type  TEXT,
    request_id    TEXT,
    body          BYTEA,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_time ON idempotency_keys (created_at);

-- Who changed what, before and after, when. Never a secret.
CREATE TABLE audit_log (
    id           BIGSERIAL PRIMARY KEY,
    at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    actor        TEXT NOT NULL,
    action       TEXT NOT NULL,
    target_type  TEXT NOT NULL,
    target_id    TEXT NOT NULL,
    before       JSONB,
    after        JSONB
);
CREATE INDEX audit_log_target ON audit_log (target_type, target_id);

-- Money records and the audit log are append-only: the database refuses edits and deletes.
CREATE FUNCTION runaii_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER cost_records_append_only BEFORE UPDATE OR DELETE ON cost_records
    FOR EACH ROW EXECUTE FUNCTION runaii_append_only();
CREATE TRIGGER credit_ledger_append_only BEFORE UPDATE OR DELETE ON credit_ledger
    FOR EACH ROW EXECUTE FUNCTION runaii_append_only();
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION runaii_append_only();
