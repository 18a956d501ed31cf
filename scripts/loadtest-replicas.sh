#!/usr/bin/env bash
# The replica-loss load test: three gateway replicas behind one address (loadtest's
# `balancer`), one Postgres, one Redis, the instant mock worker as the upstream. A closed-loop load of
# plain, schema, streamed and abandoned requests runs for LT_SECONDS; after LT_KILL_AFTER seconds one
# replica is killed with SIGKILL. Then:
#   - the load test reconciles the ledger to the last digit (`--replica-loss`: a stream the dead replica
#     was sending may end with no record and nothing charged; every completed answer must be recorded,
#     with the cost it was told);
#   - no request id is recorded twice;
#   - the dead replica's holds and credit leases are recovered by the survivors within its timeout, and
#     nothing is left reserved.
# Exits 1 on any discrepancy. Output: .data/loadtest-replicas/<time>/ (logs and the JSON report).
#
# Environment: LT_SECONDS (30), LT_KILL_AFTER (10), LT_CONCURRENCY (16), LT_PROFILE (release|debug,
# default release), DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432), REDIS_URL
# (default redis://127.0.0.1:6379/8).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"

seconds="${LT_SECONDS:-30}" kill_after="${LT_KILL_AFTER:-10}" clients="${LT_CONCURRENCY:-16}"
profile="${LT_PROFILE:-release}"
out="$root/.data/loadtest-replicas/$(date -u +%Y%m%dT%H%M%SZ)"
server="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/runaii}"; server="${server%/*}"
database="runaii_replicas_$(date +%s)"
export DATABASE_URL="$server/$database"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/8}"
# Short heartbeats, so the dead replica's holds are recovered within seconds of the run's end.
export RUNAII_REPLICA_HEARTBEAT_MS=500 RUNAII_REPLICA_TIMEOUT_MS=3000
RUNAII_WORKER_SECRET="replicas-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export RUNAII_WORKER_SECRET
unset RUNAII_WORKER_SECRET_FILE
mock_port=18491 balancer_port=18490 ports=(18492 18493 18494)

say() { echo "loadtest-replicas: $*" >&2; }
die() { say "$*"; exit 1; }
mkdir -p "$out"
cleanup() {
  local running
  running="$(jobs -pr)"
  [ -n "$running" ] && { kill $running 2>/dev/null || true; wait 2>/dev/null || true; }
  psql -X -q -d "$server/postgres" -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT
wait_http() {
  local deadline=$((SECONDS + 30))
  until [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" || true)" = 200 ]; do
    [ "$SECONDS" -lt "$deadline" ] || die "$1 did not answer 200 within 30 s (logs in $out)"
    sleep 0.2
  done
}
command -v psql >/dev/null && command -v curl >/dev/null || die "psql and curl are needed"
pg_isready -q -d "$server/postgres" -t 3 || die "Postgres at $server does not answer"

# Debug: the same selection as scripts/test.sh, so its build is reused (`-p` would unify features
# differently and rebuild llama.cpp). Release: only what this test runs.
flags=(--locked --workspace --all-targets)
[ "$profile" = release ] && flags=(--locked --release -p runaii-gateway -p runaii-loadtest)
say "building ($profile)"
cargo build "${flags[@]}" >&2
bin="$CARGO_TARGET_DIR/$profile"

psql -X -q -d "$server/postgres" -c "CREATE DATABASE $database" >/dev/null
gw="$bin/runaii-gateway"
RUST_LOG=error "$gw" migrate >/dev/null
RUST_LOG=error "$gw" upsert-model --id mock-model --context-length 4096 --input-price 0.10 --output-price 0.30 \
  --worker-url "http://127.0.0.1:$mock_port" >/dev/null
RUST_LOG=error "$gw" create-key --tenant replicas --name loadtest | tail -n 1 >"$out/api-key"
RUST_LOG=error "$gw" grant-credits --tenant replicas --amount 1000 >/dev/null

# Streams take ~0.3 s (16 tokens, 20 ms apart), so the kill finds some in the middle.
"$bin/mock-worker" --listen "127.0.0.1:$mock_port" --model mock-model --tokens 16 --token-delay-ms 20 >"$out/mock.log" 2>&1 &
wait_http "http://127.0.0.1:$mock_port/health"
pids=()
for port in "${ports[@]}"; do
  "$gw" serve --listen "127.0.0.1:$port" --default-rpm 100000000 --default-tpm 4000000000 >"$out/gateway-$port.log" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:$port/health"
done
"$bin/balancer" --listen "127.0.0.1:$balancer_port" \
  --backends "$(printf '127.0.0.1:%s,' "${ports[@]}" | sed 's/,$//')" >"$out/balancer.log" 2>&1 &
wait_http "http://127.0.0.1:$balancer_port/health"

say "$clients clients for $seconds s through 127.0.0.1:$balancer_port; SIGKILL to replica :${ports[1]} after $kill_after s"
"$bin/loadtest" --base-url "http://127.0.0.1:$balancer_port" --api-key-file "$out/api-key" --model mock-model \
  --concurrency "$clients" --duration "${seconds}s" --database-url "$DATABASE_URL" --replica-loss --json \
  >"$out/report.json" 2>"$out/loadtest.log" &
load=$!
sleep "$kill_after"
kill -KILL "${pids[1]}"
say "killed replica :${ports[1]} (pid ${pids[1]})"
status=0
wait "$load" || status=$?

python3 - "$out/report.json" <<'PY' >&2
import json, sys
r = json.load(open(sys.argv[1]))
s, rec = r["summary"], r["reconciliation"] or {}
print("sent", s.get("sent"), "| completed/s", round(s.get("completed_per_s", 0)), "| outcomes", json.dumps(s.get("outcomes")))
t = rec.get("totals", {})
print("reconciliation:", "passed" if not rec.get("discrepancies") else "FAILED", "| records", t.get("records"),
      "| cut with no record (dead replica)", t.get("cut_unrecorded"), "| ledger", t.get("ledger"))
for d in rec.get("discrepancies", [])[:20]:
    print("  discrepancy:", d)
PY

q() { psql -X -q -d "$DATABASE_URL" -tAc "$1"; }
twice="$(q "SELECT count(*) FROM (SELECT request_id FROM cost_records GROUP BY request_id HAVING count(*) > 1) d")"
[ "$twice" = 0 ] || { say "FAILED: $twice request ids recorded twice"; status=1; }
# The dead replica's holds and leases: released by a survivor once its heartbeat is 3 s stale.
deadline=$((SECONDS + 30))
while :; do
  left="$(q "SELECT (SELECT count(*) FROM credit_holds) + (SELECT count(*) FROM credit_leases l WHERE NOT EXISTS (SELECT 1 FROM gateway_replicas r WHERE r.id = l.replica_id AND r.last_seen > now() - interval '3 seconds'))")"
  [ "$left" = 0 ] && break
  [ "$SECONDS" -lt "$deadline" ] || { say "FAILED: $left holds or dead replicas' leases left 30 s after the run"; status=1; break; }
  sleep 1
done
say "holds and the dead replica's leases recovered: $([ "$left" = 0 ] && echo yes || echo no)"
say "report: $out/report.json"
exit "$status"
