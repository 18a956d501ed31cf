-- Staff tokens revoked before they expire, by their `jti`. Every replica keeps the list in memory and hears
-- each new row through `NOTIFY runaii_changes 'token:<jti>'` in the revoking transaction. A row is kept
-- until no token with its `jti` could still be accepted (`kept_until`: the revocation time plus the longest
-- lifetime a token may have), then deleted by housekeeping.
CREATE TABLE revoked_admin_tokens (
    jti         TEXT PRIMARY KEY CHECK (length(jti) BETWEEN 1 AND 200),
    revoked_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    kept_until  TIMESTAMPTZ NOT NULL,
    actor       TEXT NOT NULL
);
CREATE INDEX revoked_admin_tokens_kept_until ON revoked_admin_tokens (kept_until);
