#!/usr/bin/env bash
# Times the console's pages over a large ledger (docs/console.md, "Large lists"): seeds a database with
# BENCH_RECORDS cost records (default 500,000; 40% of them, with their ledger charges, belong to the
# customer whose key signs in; the rest to 20 other tenants, over the last 30 days), starts a gateway on it
# (no worker: no page here needs one), signs in as the customer and as staff with curl, and prints the
# median of BENCH_RUNS (5) timings of each page. BENCH_DROP_INDEX=1 measures without the index that
# migrations/…_cost_records_by_time.sql adds.
#
# Needs the gateway built (cargo build -p runaii-gateway), Postgres (DATABASE_URL's server) and Redis
# (REDIS_URL). Uses its own database, runaii_console_bench, dropped at the end.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"

records="${BENCH_RECORDS:-500000}"
runs="${BENCH_RUNS:-5}"
gateway_bin="$CARGO_TARGET_DIR/debug/runaii-gateway"
[ -x "$gateway_bin" ] || { echo "bench: build the gateway first (cargo build -p runaii-gateway)" >&2; exit 1; }
server="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
server="${server%/*}"
db="$server/runaii_console_bench"
export PGOPTIONS='-c client_min_messages=warning' DATABASE_URL="$db" REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}" RUST_LOG=error NO_COLOR=1
export RUNAII_ADMIN_JWT_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export RUNAII_WORKER_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
work="$(mktemp -d)"
gateway_pid=""
cleanup() {
  [ -n "$gateway_pid" ] && kill "$gateway_pid" 2>/dev/null && wait "$gateway_pid" 2>/dev/null
  psql -X -q -d "$server/postgres" -c 'DROP DATABASE IF EXISTS runaii_console_bench WITH (FORCE)' >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

psql -X -q -d "$server/postgres" -c 'DROP DATABASE IF EXISTS runaii_console_bench WITH (FORCE)' -c 'CREATE DATABASE runaii_console_bench' >/dev/null
"$gateway_bin" migrate >/dev/null
"$gateway_bin" upsert-model --id smollm2-135m-instruct --context-length 4096 --input-price 0.10 --output-price 0.30 >/dev/null
key="$("$gateway_bin" create-key --tenant bench-customer --name bench | tail -n 1)"
"$gateway_bin" grant-credits --tenant bench-customer --amount 1000000 >/dev/null
token="$("$gateway_bin" issue-admin-token --subject bench --roles ops,finance,admin --ttl-hours 1)"

echo "bench: seeding $records cost records"
started=$SECONDS
psql -X -q -v ON_ERROR_STOP=1 -d "$db" <<SQL >/dev/null
INSERT INTO tenants (id, name, balance) SELECT gen_random_uuid(), 'bench-' || i, 1000 FROM generate_series(1, 20) AS i;
INSERT INTO api_keys (id, tenant_id, public_id, secret_hash, name)
  SELECT gen_random_uuid(), id, substr(md5(name), 1, 12), sha256(name::bytea), 'bench' FROM tenants WHERE name LIKE 'bench-%';
-- Record i is i × (30 days / n) before now; every fifth... every tenth-ish belongs to the customer.
INSERT INTO cost_records (request_id, tenant_id, api_key_id, model, endpoint, input_tokens, output_tokens, cost,
                          status, http_status, latency_ms, created_at)
SELECT 'chatcmpl-bench' || lpad(i::text, 9, '0'), k.tenant_id, k.id, 'smollm2-135m-instruct', 'chat.completions',
       100 + i % 400, 10 + i % 90, (100 + i % 400) * 0.0000001 + (10 + i % 90) * 0.0000003,
       CASE WHEN i % 50 = 0 THEN 'failed' ELSE 'succeeded' END, CASE WHEN i % 50 = 0 THEN 502 ELSE 200 END,
       50 + i % 500, now() - (i * (interval '30 days' / $records))
FROM generate_series(1, $records) AS i
JOIN LATERAL (
  SELECT id, tenant_id FROM api_keys
  ORDER BY (CASE WHEN i % 5 < 2 THEN (SELECT t.name FROM tenants t WHERE t.id = api_keys.tenant_id) = 'bench-customer'
                 ELSE (SELECT t.name FROM tenants t WHERE t.id = api_keys.tenant_id) = 'bench-' || (1 + i % 20) END) DESC
  LIMIT 1) AS k ON true;
INSERT INTO credit_ledger (tenant_id, kind, amount, request_id, created_at)
  SELECT tenant_id, 'charge', -cost, request_id, created_at FROM cost_records
  WHERE tenant_id = (SELECT id FROM tenants WHERE name = 'bench-customer') AND cost > 0;
ANALYZE;
SQL
echo "bench: seeded in $((SECONDS - started)) s"
if [ "${BENCH_DROP_INDEX:-0}" = 1 ]; then
  psql -X -q -d "$db" -c 'DROP INDEX IF EXISTS cost_records_time' >/dev/null
  echo "bench: without the cost_records (created_at, request_id) index"
fi

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
"$gateway_bin" serve --listen "127.0.0.1:$port" >"$work/gateway.log" 2>&1 &
gateway_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "$base/health" && break; sleep 0.2; done

# sign_in <jar> <credential>: the console's form, as a browser posts it.
sign_in() {
  local jar="$1" credential="$2" csrf
  csrf="$(curl -s -c "$jar" "$base/console/sign-in" | sed -n 's/.*name="login_csrf" value="\([0-9a-f]*\)".*/\1/p')"
  curl -s -o /dev/null -b "$jar" -c "$jar" --data-urlencode "credential=$credential" --data-urlencode "login_csrf=$csrf" \
    "$base/console/sign-in"
}
sign_in "$work/customer" "$key"
sign_in "$work/staff" "$token"

# time_page <label> <jar> <path>: the median of $runs timings, with the answer's status and size.
time_page() {
  local label="$1" jar="$2" path="$3" out times=() status size
  for _ in $(seq "$runs"); do
    out="$(curl -s -o "$work/page" -b "$jar" -w '%{http_code} %{time_total}' "$base$path")"
    status="${out% *}"
    times+=("${out#* }")
  done
  size="$(wc -c <"$work/page")"
  printf '| %s | %s | %s | %s |\n' "$label" "$status" \
    "$(printf '%s\n' "${times[@]}" | sort -n | awk -v n="$runs" 'NR == int((n + 1) / 2) { printf "%.0f ms", $1 * 1000 }')" "$size"
}

customer_id="$(psql -X -tA -d "$db" -c "SELECT id FROM tenants WHERE name = 'bench-customer'")"
# A cursor in the middle of the customer's records, and of the month's, as the pages' own links carry them.
mid="$(psql -X -tA -d "$db" -c "SELECT (extract(epoch FROM created_at) * 1000000)::bigint || ':' || request_id FROM cost_records
  WHERE tenant_id = '$customer_id' ORDER BY created_at DESC OFFSET $((records * 2 / 10)) LIMIT 1")"
month="$(date -u +%Y-%m)"
month_mid="$(psql -X -tA -d "$db" -c "SELECT (extract(epoch FROM created_at) * 1000000)::bigint || ':' || request_id FROM cost_records
  WHERE created_at >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
  ORDER BY created_at, request_id OFFSET (SELECT count(*) / 2 FROM cost_records
  WHERE created_at >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') LIMIT 1")"
ledger_mid="$(psql -X -tA -d "$db" -c "SELECT id FROM credit_ledger WHERE tenant_id = '$customer_id' ORDER BY id OFFSET $((records * 2 / 10)) LIMIT 1")"
one="$(psql -X -tA -d "$db" -c "SELECT request_id FROM cost_records WHERE tenant_id = '$customer_id' LIMIT 1")"
enc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

echo
echo "$records cost records ($(psql -X -tA -d "$db" -c "SELECT count(*) FROM cost_records WHERE tenant_id = '$customer_id'") the customer's), median of $runs:"
echo
echo "| page | status | time | bytes |"
echo "|---|---|---|---|"
time_page "customer overview (balance, month, 30-day charts)" "$work/customer" "/console/account"
time_page "customer requests, first page" "$work/customer" "/console/requests"
time_page "customer requests, a page in the middle" "$work/customer" "/console/requests?cursor=$(enc "$mid")"
time_page "customer request detail" "$work/customer" "/console/requests/$one"
time_page "customer keys" "$work/customer" "/console/keys"
time_page "finance cost records, this month, first page" "$work/staff" "/console/finance/costs?month=$month"
time_page "finance cost records, this month, middle page" "$work/staff" "/console/finance/costs?month=$month&cursor=$(enc "$month_mid")"
time_page "finance cost records, one tenant, this month" "$work/staff" "/console/finance/costs?month=$month&tenant_id=$customer_id"
time_page "finance monthly totals" "$work/staff" "/console/finance/totals?month=$month"
time_page "finance tenants" "$work/staff" "/console/finance/tenants"
time_page "finance ledger, first page" "$work/staff" "/console/finance/ledger?tenant_id=$customer_id"
time_page "finance ledger, middle page" "$work/staff" "/console/finance/ledger?tenant_id=$customer_id&cursor=$ledger_mid"
time_page "ops catalog" "$work/staff" "/console/ops/models"
time_page "ops workers (15-minute error rates)" "$work/staff" "/console/ops/workers"
time_page "audit log" "$work/staff" "/console/ops/audit"
time_page "CSV export, one tenant, this month" "$work/staff" "/console/finance/costs.csv?month=$month&tenant_id=$customer_id"
