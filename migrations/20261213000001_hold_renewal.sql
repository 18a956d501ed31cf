-- A credit hold lives as long as its request: a request still running renews its hold (`renewed_at`)
-- every quarter of the gateway's `--hold-expiry-s`, and the age limit that releases the holds of requests
-- whose gateway died counts from the last renewal, not from the hold's creation. A stream read slowly for
-- longer than the age limit so keeps its hold, and its credit is never spent twice.
ALTER TABLE credit_holds ADD COLUMN renewed_at TIMESTAMPTZ NOT NULL DEFAULT now();
DROP INDEX credit_holds_time;
CREATE INDEX credit_holds_renewed ON credit_holds (renewed_at);
