#!/usr/bin/env bash
# What one ledger commit costs Postgres, against the commits it could be (docs/benchmarks.md): pgbench on
# one connection calls, in turn,
#
#   update     a one-row UPDATE (the least a durable commit can do)
#   settle     runaii_settle_leased with one record (what a lone request's commit does today)
#   inserts    the cost record and its ledger entry, two INSERTs in one statement (balances untouched)
#   record     the cost record alone, into a copy of cost_records without foreign keys
#
# and reports each one's latency and Postgres CPU per transaction (every postgres process, reaped
# backends included), beside pg_test_fsync's fdatasync time. Each runs BENCH_COMMIT_SECONDS (5), twice,
# in alternating order.
#
#   scripts/bench-commit.sh
#
# Uses the database runaii_bench_commit (dropped and made again) on Postgres at $DATABASE_URL's server.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"
say() { echo "bench-commit: $*" >&2; }

seconds="${BENCH_COMMIT_SECONDS:-5}"
base_url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/runaii}"
db="${base_url%/*}/runaii_bench_commit"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
command -v pgbench >/dev/null || { say "pgbench is needed (Debian: postgresql-client)"; exit 1; }

psql -X -q -d "${base_url%/*}/postgres" -c 'DROP DATABASE IF EXISTS runaii_bench_commit WITH (FORCE)' -c 'CREATE DATABASE runaii_bench_commit' >/dev/null
for migration in migrations/*.sql; do psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$migration" >/dev/null; done
tenant=11111111-1111-1111-1111-111111111111 key=22222222-2222-2222-2222-222222222222 replica=33333333-3333-3333-3333-333333333333
psql -X -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null <<SQL
INSERT INTO tenants (id, name, balance, reserved) VALUES ('$tenant', 'bench', 1000000000, 1000000);
INSERT INTO api_keys (id, tenant_id, public_id, secret_hash) VALUES ('$key', '$tenant', 'bench', decode(repeat('00', 32), 'hex'));
INSERT INTO credit_leases VALUES ('$tenant', '$replica', 1000000);
CREATE SEQUENCE bench_ids;
CREATE TABLE cost_records_plain (LIKE cost_records INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES);
SQL

values="'b-' || nextval('bench_ids'), '$tenant', '$key', 'm', 'chat.completions', 10, 16, 0.000001, 'succeeded', 200, NULL, 3, 0"
columns="request_id, tenant_id, api_key_id, model, endpoint, input_tokens, output_tokens, cost, status, http_status, error_code, latency_ms, cached_tokens"
echo "UPDATE credit_leases SET amount = amount WHERE tenant_id = '$tenant' AND replica_id = '$replica';" >"$work/update.sql"
echo "SELECT runaii_settle_leased(ARRAY['b-' || nextval('bench_ids')], ARRAY['$tenant'::uuid], ARRAY['$key'::uuid], ARRAY['m'], ARRAY['chat.completions'], ARRAY[10], ARRAY[16], ARRAY[0.000001::numeric], ARRAY['succeeded'], ARRAY[200], ARRAY[NULL::text], ARRAY[3], ARRAY[0], '$replica'::uuid);" >"$work/settle.sql"
echo "WITH r AS (INSERT INTO cost_records ($columns) VALUES ($values) RETURNING request_id, tenant_id, cost) INSERT INTO credit_ledger (tenant_id, kind, amount, request_id) SELECT tenant_id, 'charge', -cost, request_id FROM r;" >"$work/inserts.sql"
echo "INSERT INTO cost_records_plain ($columns) VALUES ($values);" >"$work/record.sql"

postgres_cpu() { # clock ticks of every postgres process, with the children each has reaped
  local total=0 p fields
  for p in $(pgrep -x postgres); do
    read -r -a fields <"/proc/$p/stat" 2>/dev/null || continue
    total=$((total + fields[13] + fields[14] + fields[15] + fields[16]))
  done
  echo "$total"
}

run() { # run <name>
  local before after out n latency
  before=$(postgres_cpu)
  out="$(pgbench -n -f "$work/$1.sql" -c 1 -T "$seconds" -M prepared "$db" 2>&1)"
  after=$(postgres_cpu)
  n="$(awk '/number of transactions actually processed/ {print $NF}' <<<"$out" | cut -d/ -f1)"
  latency="$(awk '/latency average/ {print $4}' <<<"$out")"
  printf '%-8s %7s tx  latency %s ms  postgres CPU %d us/tx\n' "$1" "$n" "$latency" $(((after - before) * 1000000 / $(getconf CLK_TCK) / n))
}

fsync="$(ls /usr/lib/postgresql/*/bin/pg_test_fsync 2>/dev/null | tail -n 1)"
if [ -n "$fsync" ]; then
  "$fsync" -s 2 -f "$work/fsync.tmp" 2>&1 | grep -m1 -E '^ +fdatasync' | sed 's/^ */pg_test_fsync: /'  || true  # grep stops reading early
fi
for name in update settle inserts record; do run "$name"; done
for name in record inserts settle update; do run "$name"; done
psql -X -q -d "${base_url%/*}/postgres" -c 'DROP DATABASE runaii_bench_commit WITH (FORCE)' >/dev/null
