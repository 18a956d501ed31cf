-- How many requests a tenant may have in flight at once, over every gateway replica (the gateway counts
-- them in Redis, `gateway/src/concurrency`). Past it the tenant's next request is a 429 with
-- `retry-after`, so one tenant cannot fill a model's queues in front of the others. 32 by default: a
-- tenant alone still fills several workers' sequences; unconfined admins change it per tenant.
ALTER TABLE tenants
    ADD COLUMN max_concurrent_requests INTEGER NOT NULL DEFAULT 32
        CONSTRAINT tenants_max_concurrent_requests_positive CHECK (max_concurrent_requests > 0);
