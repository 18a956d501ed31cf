-- A gateway replica's slice of a tenant's available credit (gateway/src/billing/leases.rs). The replica
-- holds each request's worst-case cost against its slice in memory, with no round trip; a request's
-- charge comes out of the slice when its record is written. A lease is counted in `tenants.reserved`
-- like a hold, so the no-overdraw check (balance >= reserved) bounds leases and holds together: leases of
-- all replicas can never sum past a balance. The leases of a replica that died are released with its
-- holds; no foreign key to gateway_replicas for the same reason as credit_holds.replica_id.
CREATE TABLE credit_leases (
    tenant_id   UUID NOT NULL REFERENCES tenants(id),
    replica_id  UUID NOT NULL,
    amount      NUMERIC(30, 16) NOT NULL CHECK (amount >= 0),
    PRIMARY KEY (tenant_id, replica_id)
);
CREATE INDEX credit_leases_replica ON credit_leases (replica_id);
