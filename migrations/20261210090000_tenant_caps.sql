-- Tenant-wide caps, set only by unconfined admins; NULL means none. Requests and tokens per minute are
-- enforced across every key and gateway replica of the tenant (Redis buckets, like the keys' limits); the
-- monthly spend cap (USD, exact) is checked against the sum of the tenant's cost records this month (UTC).
-- A key's own limits are at most its tenant's caps (checked when a key or a cap is set, and at admission).
ALTER TABLE tenants
    ADD COLUMN rpm_limit INTEGER CHECK (rpm_limit > 0),
    ADD COLUMN tpm_limit INTEGER CHECK (tpm_limit > 0),
    ADD COLUMN monthly_spend_cap NUMERIC(30, 16) CHECK (monthly_spend_cap >= 0);

-- The key a key was created with (a customer signed in to the console with a key creates keys with it):
-- the new key's expiry and limits are at most its parent's, and revoking a key can revoke every key minted
-- from it, however deep. NULL for keys made by staff or the command line.
ALTER TABLE api_keys ADD COLUMN parent_key_id UUID REFERENCES api_keys(id);
CREATE INDEX api_keys_parent ON api_keys (parent_key_id) WHERE parent_key_id IS NOT NULL;
