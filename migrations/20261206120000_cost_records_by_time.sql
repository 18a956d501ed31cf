-- Cost records read by time alone, across tenants: finance's month of records page by page (and its CSV
-- export and monthly totals), and ops' last minutes of outcomes per model (the console's workers page).
-- The (tenant_id, created_at) index serves only one tenant at a time; without this one each of those reads
-- scans the whole table. request_id is the page cursor's tie-breaker, so a page is one index range.
-- Measured in docs/console.md ("Large lists"). Built without CONCURRENTLY (migrations run in a
-- transaction): on a large existing table, build it by hand with CONCURRENTLY first, under this name.
CREATE INDEX IF NOT EXISTS cost_records_time ON cost_records (created_at, request_id);
