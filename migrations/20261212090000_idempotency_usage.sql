-- What each tenant keeps under `Idempotency-Key`s: how many keys and how many bytes of stored answers, so
-- that a quota check is one primary-key read instead of a sum over the tenant's keys. Kept by statement
-- triggers on `idempotency_keys` (one update per tenant per statement, so the hourly expiry of many keys
-- stays one pass), in the same transaction as the change itself.
CREATE TABLE idempotency_usage (
    tenant_id  UUID PRIMARY KEY REFERENCES tenants(id),
    keys       BIGINT NOT NULL DEFAULT 0 CHECK (keys >= 0),
    bytes      BIGINT NOT NULL DEFAULT 0 CHECK (bytes >= 0)
);

INSERT INTO idempotency_usage (tenant_id, keys, bytes)
SELECT tenant_id, count(*), coalesce(sum(octet_length(body)), 0) FROM idempotency_keys GROUP BY tenant_id;

-- Adds to one tenant's totals (negative numbers take away). An UPDATE first: a row proposed for INSERT is
-- checked against the CHECKs before its conflict is found, so a negative change must never be inserted.
CREATE FUNCTION runaii_idempotency_usage_add(changed_keys BIGINT, changed_bytes BIGINT, tenant UUID) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE idempotency_usage SET keys = keys + changed_keys, bytes = bytes + changed_bytes WHERE tenant_id = tenant;
    IF NOT FOUND THEN
        INSERT INTO idempotency_usage AS u (tenant_id, keys, bytes) VALUES (tenant, changed_keys, changed_bytes)
        ON CONFLICT (tenant_id) DO UPDATE SET keys = u.keys + EXCLUDED.keys, bytes = u.bytes + EXCLUDED.bytes;
    END IF;
END
$$;

CREATE FUNCTION runaii_idempotency_usage_track() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM runaii_idempotency_usage_add(count(*), coalesce(sum(octet_length(body)), 0), tenant_id)
        FROM new_rows GROUP BY tenant_id ORDER BY tenant_id;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM runaii_idempotency_usage_add(-count(*), -coalesce(sum(octet_length(body)), 0), tenant_id)
        FROM old_rows GROUP BY tenant_id ORDER BY tenant_id;
    ELSE
        -- Keys keep their tenant; only the bytes of their answers change.
        PERFORM runaii_idempotency_usage_add(0::bigint, d.bytes, d.tenant_id)
        FROM (
            SELECT tenant_id, sum(bytes)::bigint AS bytes FROM (
                SELECT tenant_id, coalesce(octet_length(body), 0)::bigint AS bytes FROM new_rows
                UNION ALL
                SELECT tenant_id, -coalesce(octet_length(body), 0)::bigint FROM old_rows
            ) AS both_sides GROUP BY tenant_id
        ) AS d
        WHERE d.bytes <> 0
        ORDER BY d.tenant_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER idempotency_usage_on_insert AFTER INSERT ON idempotency_keys
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION runaii_idempotency_usage_track();
CREATE TRIGGER idempotency_usage_on_update AFTER UPDATE ON idempotency_keys
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION runaii_idempotency_usage_track();
CREATE TRIGGER idempotency_usage_on_delete AFTER DELETE ON idempotency_keys
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION runaii_idempotency_usage_track();
