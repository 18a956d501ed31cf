-- Settling a group of cost records in one statement (issue 14). The ledger writer of each gateway replica
-- commits whatever records are queued as one group. Done as separate statements inside BEGIN … COMMIT, a
-- group cost eight round trips; with this function it costs one. The function call is its own transaction,
-- so there is still one WAL flush per group. The rules are the same as before, when the gateway computed
-- them from what it read under the same locks:
--
-- * Locks are taken in the order every other writer takes them: the exact holds' rows, then the tenants'
--   rows by id, then the lease rows. A concurrent release of stale holds therefore waits; it never
--   deadlocks.
-- * What a record may be charged is the cost, or, when that is more than its hold plus what the tenant has
--   otherwise available, all of that. The rest of the cost is recorded as `shortfall`, for finance to
--   see; the no-overdraw check never refuses the record (a refused record would be lost).
-- * The records of one tenant are charged in the order given, each against what the previous ones left.
-- * An exact hold (a `credit_holds` row) is released whole. A request held against a replica's lease
--   (`p_lease_replicas[i]` set) is charged out of its worst case there. What it is charged, up to that worst
--   case, leaves the lease with it; the rest of the worst case stays leased for the next requests.
--
-- Returns each record's charge and shortfall, in the order given (`ord` counts from 1). A second record for
-- one request id violates the primary key, and then nothing of the group is written; the caller retries the
-- records one at a time.
CREATE FUNCTION runaii_settle(
    p_request_ids     TEXT[],
    p_tenant_ids      UUID[],
    p_api_key_ids     UUID[],
    p_models          TEXT[],
    p_endpoints       TEXT[],
    p_input_tokens    INT4[],
    p_output_tokens   INT4[],
    p_costs           NUMERIC[],
    p_statuses        TEXT[],
    p_http_statuses   INT4[],
    p_error_codes     TEXT[],
    p_latencies_ms    INT4[],
    p_cached_tokens   INT4[],
    p_lease_replicas  UUID[],
    p_lease_worst     NUMERIC[]
) RETURNS TABLE (ord INT4, charged NUMERIC, shortfall NUMERIC)
-- The statements below are the same shape every call, and only their arrays' lengths differ. A custom
-- plan for each call saved nothing, but re-planning cost 15% of Postgres' CPU per request (measured under
-- the 16-client load).
SET plan_cache_mode = force_generic_plan
LANGUAGE plpgsql AS $$
DECLARE
    n           INT4 := cardinality(p_request_ids);
    hold_ids    TEXT[] := '{}';
    hold_amount NUMERIC[] := '{}';
    t_ids       UUID[];
    t_balance   NUMERIC[];
    t_reserved  NUMERIC[];
    -- What each tenant had when locked, to write back the difference.
    t_balance0  NUMERIC[];
    t_reserved0 NUMERIC[];
    v_charged   NUMERIC[] := '{}';
    v_short     NUMERIC[] := '{}';
    v_released  NUMERIC[] := '{}';
    t           INT4;
    h           INT4;
    hold        NUMERIC;
    c           NUMERIC;
BEGIN
    -- Only requests without a lease have hold rows; a group of leased requests skips the statement.
    IF array_position(p_lease_replicas, NULL) IS NOT NULL THEN
        WITH released AS (DELETE FROM credit_holds WHERE request_id = ANY(p_request_ids) RETURNING request_id, amount)
        SELECT coalesce(array_agg(r.request_id), '{}'), coalesce(array_agg(r.amount), '{}')
            INTO hold_ids, hold_amount FROM released r;
    END IF;
    -- `reserved` still counts these requests' holds: they are released below, with the charges.
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}'), coalesce(array_agg(l.balance ORDER BY l.id), '{}'),
           coalesce(array_agg(l.reserved ORDER BY l.id), '{}')
        INTO t_ids, t_balance, t_reserved
        FROM (SELECT x.id, x.balance, x.reserved FROM tenants x WHERE x.id = ANY(p_tenant_ids) ORDER BY x.id FOR UPDATE) l;
    t_balance0 := t_balance;
    t_reserved0 := t_reserved;

    FOR i IN 1 .. coalesce(n, 0) LOOP
        t := array_position(t_ids, p_tenant_ids[i]);
        IF t IS NULL THEN
            RAISE EXCEPTION 'cost record % names tenant %, which does not exist', p_request_ids[i], p_tenant_ids[i]
                USING ERRCODE = 'foreign_key_violation';
        END IF;
        IF p_lease_replicas[i] IS NOT NULL THEN
            hold := p_lease_worst[i];
        ELSE
            h := array_position(hold_ids, p_request_ids[i]);
            hold := CASE WHEN h IS NULL THEN 0 ELSE hold_amount[h] END;
        END IF;
        c := least(p_costs[i], greatest(t_balance[t] - t_reserved[t] + hold, 0));
        v_charged[i] := c;
        v_short[i] := p_costs[i] - c;
        v_released[i] := CASE WHEN p_lease_replicas[i] IS NOT NULL THEN least(c, p_lease_worst[i]) ELSE hold END;
        t_balance[t] := t_balance[t] - c;
        t_reserved[t] := t_reserved[t] - v_released[i];
    END LOOP;

    -- Only leased requests change lease rows; a group of exact holds skips the statement.
    IF cardinality(array_remove(p_lease_replicas, NULL)) > 0 THEN
        UPDATE credit_leases SET amount = credit_leases.amount - d.amount
            FROM (SELECT s.tenant_id, s.replica_id, sum(s.released) AS amount
                    FROM unnest(p_tenant_ids, p_lease_replicas, v_released) AS s(tenant_id, replica_id, released)
                   WHERE s.replica_id IS NOT NULL
                   GROUP BY s.tenant_id, s.replica_id) d
           WHERE credit_leases.tenant_id = d.tenant_id AND credit_leases.replica_id = d.replica_id;
    END IF;

    INSERT INTO cost_records (request_id, tenant_id, api_key_id, model, endpoint, input_tokens, output_tokens,
                              cost, shortfall, status, http_status, error_code, latency_ms, cached_tokens)
        SELECT * FROM unnest(p_request_ids, p_tenant_ids, p_api_key_ids, p_models, p_endpoints, p_input_tokens, p_output_tokens,
                             p_costs, v_short, p_statuses, p_http_statuses, p_error_codes, p_latencies_ms, p_cached_tokens);

    UPDATE tenants SET balance = tenants.balance - (d.balance0 - d.balance),
                       reserved = tenants.reserved - (d.reserved0 - d.reserved)
        FROM unnest(t_ids, t_balance0, t_balance, t_reserved0, t_reserved) AS d(id, balance0, balance, reserved0, reserved)
       WHERE tenants.id = d.id AND (d.balance0 <> d.balance OR d.reserved0 <> d.reserved);

    INSERT INTO credit_ledger (tenant_id, kind, amount, request_id)
        SELECT s.tenant_id, 'charge', -s.charged, s.request_id
          FROM unnest(p_tenant_ids, v_charged, p_request_ids) AS s(tenant_id, charged, request_id)
         WHERE s.charged > 0;

    RETURN QUERY SELECT s.ord::INT4, s.charged, s.shortfall FROM unnest(v_charged, v_short) WITH ORDINALITY AS s(charged, shortfall, ord)
        ORDER BY s.ord;
END
$$;
