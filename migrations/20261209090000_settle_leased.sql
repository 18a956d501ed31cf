-- Settling leased requests in fewer statements, and settling them right when their lease is gone (issue 14).
--
-- 1. `runaii_settle_leased`: the common group, every record held against this replica's lease and costing
--    no more than its worst case. Such a record is charged its whole cost (its worst case is still in
--    `reserved`, and balance >= reserved), so nothing needs to be read first: the tenants are charged,
--    the lease gives up what was charged, and the records and their ledger entries are inserted, in four
--    statements instead of `runaii_settle`'s seven. Measured with pgbench (one connection, one record per
--    call), the backend's CPU per call fell by about a third; see docs/benchmarks.md. When the lease rows
--    cannot give up what was charged (a lease released meanwhile because this replica was presumed dead),
--    it raises and nothing is written: the caller settles the group with `runaii_settle`, which handles it.
--
-- 2. `runaii_settle` again, with one change: a leased record is held by what its lease still has, not by
--    its worst case alone. A replica presumed dead (it lost the database for longer than the replicas'
--    timeout) has its leases released by the others; requests it had in flight against them then settle
--    as if they had no hold: charged from what is available, and nothing released from `reserved` twice.
--    Before, such a record took its worst case out of `reserved` a second time, the check on `reserved`
--    refused the group and the records were not written.
CREATE FUNCTION runaii_settle_leased(
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
    p_replica         UUID
) RETURNS INT4
-- As runaii_settle: the same shape every call, so one generic plan per statement.
SET plan_cache_mode = force_generic_plan
LANGUAGE plpgsql AS $$
DECLARE
    charged_tenants INT4;
    charged_leases  INT4;
BEGIN
    -- Tenant rows are locked in id order, as every other writer locks them; with one tenant (the usual
    -- group) the update below takes its only lock.
    IF NOT (p_tenant_ids <@ p_tenant_ids[1:1]) THEN
        PERFORM FROM tenants WHERE id = ANY(p_tenant_ids) ORDER BY id FOR UPDATE;
    END IF;
    UPDATE tenants SET balance = tenants.balance - d.amount, reserved = tenants.reserved - d.amount
      FROM (SELECT s.tenant_id, sum(s.cost) AS amount FROM unnest(p_tenant_ids, p_costs) AS s(tenant_id, cost)
             GROUP BY s.tenant_id) d
     WHERE tenants.id = d.tenant_id AND d.amount > 0;
    GET DIAGNOSTICS charged_tenants = ROW_COUNT;
    -- The check on `amount` refuses a lease that has less than was charged from it.
    UPDATE credit_leases SET amount = credit_leases.amount - d.amount
      FROM (SELECT s.tenant_id, sum(s.cost) AS amount FROM unnest(p_tenant_ids, p_costs) AS s(tenant_id, cost)
             GROUP BY s.tenant_id) d
     WHERE credit_leases.tenant_id = d.tenant_id AND credit_leases.replica_id = p_replica AND d.amount > 0;
    GET DIAGNOSTICS charged_leases = ROW_COUNT;
    IF charged_leases <> charged_tenants THEN
        RAISE EXCEPTION 'replica % has no lease of % of the tenants charged', p_replica, charged_tenants - charged_leases
            USING ERRCODE = 'no_data_found';
    END IF;

    INSERT INTO cost_records (request_id, tenant_id, api_key_id, model, endpoint, input_tokens, output_tokens,
                              cost, status, http_status, error_code, latency_ms, cached_tokens)
        SELECT * FROM unnest(p_request_ids, p_tenant_ids, p_api_key_ids, p_models, p_endpoints, p_input_tokens, p_output_tokens,
                             p_costs, p_statuses, p_http_statuses, p_error_codes, p_latencies_ms, p_cached_tokens);
    INSERT INTO credit_ledger (tenant_id, kind, amount, request_id)
        SELECT s.tenant_id, 'charge', -s.cost, s.request_id
          FROM unnest(p_tenant_ids, p_costs, p_request_ids) AS s(tenant_id, cost, request_id)
         WHERE s.cost > 0;
    RETURN cardinality(p_request_ids);
END
$$;

CREATE OR REPLACE FUNCTION runaii_settle(
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
SET plan_cache_mode = force_generic_plan
LANGUAGE plpgsql AS $$
DECLARE
    n           INT4 := cardinality(p_request_ids);
    hold_ids    TEXT[] := '{}';
    hold_amount NUMERIC[] := '{}';
    t_ids       UUID[];
    t_balance   NUMERIC[];
    t_reserved  NUMERIC[];
    t_balance0  NUMERIC[];
    t_reserved0 NUMERIC[];
    -- The lease rows of the group's leased requests, and what each still has to give.
    l_keys      TEXT[] := '{}';
    l_left      NUMERIC[] := '{}';
    v_charged   NUMERIC[] := '{}';
    v_short     NUMERIC[] := '{}';
    v_released  NUMERIC[] := '{}';
    t           INT4;
    h           INT4;
    l           INT4;
    hold        NUMERIC;
    c           NUMERIC;
BEGIN
    IF array_position(p_lease_replicas, NULL) IS NOT NULL THEN
        WITH released AS (DELETE FROM credit_holds WHERE request_id = ANY(p_request_ids) RETURNING request_id, amount)
        SELECT coalesce(array_agg(r.request_id), '{}'), coalesce(array_agg(r.amount), '{}')
            INTO hold_ids, hold_amount FROM released r;
    END IF;
    SELECT coalesce(array_agg(x.id ORDER BY x.id), '{}'), coalesce(array_agg(x.balance ORDER BY x.id), '{}'),
           coalesce(array_agg(x.reserved ORDER BY x.id), '{}')
        INTO t_ids, t_balance, t_reserved
        FROM (SELECT y.id, y.balance, y.reserved FROM tenants y WHERE y.id = ANY(p_tenant_ids) ORDER BY y.id FOR UPDATE) x;
    t_balance0 := t_balance;
    t_reserved0 := t_reserved;
    -- Lease rows after tenant rows, as every other writer locks them.
    IF cardinality(array_remove(p_lease_replicas, NULL)) > 0 THEN
        SELECT coalesce(array_agg(x.tenant_id::text || '/' || x.replica_id::text), '{}'), coalesce(array_agg(x.amount), '{}')
            INTO l_keys, l_left
            FROM (SELECT y.tenant_id, y.replica_id, y.amount FROM credit_leases y
                   WHERE (y.tenant_id, y.replica_id) IN (SELECT * FROM unnest(p_tenant_ids, p_lease_replicas))
                   ORDER BY y.tenant_id, y.replica_id FOR UPDATE) x;
    END IF;

    FOR i IN 1 .. coalesce(n, 0) LOOP
        t := array_position(t_ids, p_tenant_ids[i]);
        IF t IS NULL THEN
            RAISE EXCEPTION 'cost record % names tenant %, which does not exist', p_request_ids[i], p_tenant_ids[i]
                USING ERRCODE = 'foreign_key_violation';
        END IF;
        l := NULL;
        IF p_lease_replicas[i] IS NOT NULL THEN
            -- Held by what its lease still has: nothing, when the lease was released meanwhile.
            l := array_position(l_keys, p_tenant_ids[i]::text || '/' || p_lease_replicas[i]::text);
            hold := CASE WHEN l IS NULL THEN 0 ELSE least(p_lease_worst[i], l_left[l]) END;
        ELSE
            h := array_position(hold_ids, p_request_ids[i]);
            hold := CASE WHEN h IS NULL THEN 0 ELSE hold_amount[h] END;
        END IF;
        c := least(p_costs[i], greatest(t_balance[t] - t_reserved[t] + hold, 0));
        v_charged[i] := c;
        v_short[i] := p_costs[i] - c;
        v_released[i] := CASE WHEN p_lease_replicas[i] IS NOT NULL THEN least(c, hold) ELSE hold END;
        IF l IS NOT NULL THEN
            l_left[l] := l_left[l] - v_released[i];
        END IF;
        t_balance[t] := t_balance[t] - c;
        t_reserved[t] := t_reserved[t] - v_released[i];
    END LOOP;

    IF cardinality(l_keys) > 0 THEN
        UPDATE credit_leases SET amount = credit_leases.amount - d.amount
            FROM (SELECT s.tenant_id, s.replica_id, sum(s.released) AS amount
                    FROM unnest(p_tenant_ids, p_lease_replicas, v_released) AS s(tenant_id, replica_id, released)
                   WHERE s.replica_id IS NOT NULL
                   GROUP BY s.tenant_id, s.replica_id) d
           WHERE credit_leases.tenant_id = d.tenant_id AND credit_leases.replica_id = d.replica_id AND d.amount > 0;
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
