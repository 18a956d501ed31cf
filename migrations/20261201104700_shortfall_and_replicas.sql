-- Holds are bounds and a record is never dropped; a replica that dies leaves no hold behind.

-- What a request cost beyond what its tenant could still pay when it settled. The hold is the worst case,
-- so this stays 0 unless the bound was wrong; when it is not, the record is still written, with its full
-- `cost` (what the client was told), and the tenant is charged `cost - shortfall`, all it had left. So:
--     balance = Σ grants − Σ (cost − shortfall)
-- Adding a column with a constant default rewrites no row, so the append-only trigger (row-level, on
-- UPDATE and DELETE) does not fire; inserts set it.
ALTER TABLE cost_records
    ADD COLUMN shortfall NUMERIC(30, 16) NOT NULL DEFAULT 0,
    ADD CONSTRAINT cost_records_shortfall_bounds CHECK (shortfall >= 0 AND shortfall <= cost);

-- Gateway replicas that are alive: each writes its row at start, refreshes `last_seen` every few seconds
-- and deletes it at graceful shutdown. A replica whose row went stale died (or lost the database), and any
-- replica releases the holds it took.
CREATE TABLE gateway_replicas (
    id          UUID PRIMARY KEY,
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The replica that took a hold. NULL for holds taken before this column existed (or by a gateway that
-- does not say): only the age limit (`--hold-expiry-s`) releases those. Deliberately no foreign key: a
-- replica's row goes away while its holds are being released, and a later per-hold lease (an expiry column
-- renewed by the owner) can sit beside this without changing it.
ALTER TABLE credit_holds ADD COLUMN replica_id UUID;
CREATE INDEX credit_holds_replica ON credit_holds (replica_id);
