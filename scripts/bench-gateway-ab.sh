#!/usr/bin/env bash
# A/B of two gateway binaries in one run (docs/benchmarks.md, "Gateway CPU per request"): the same
# mock-worker, database and Redis serve both in turn; each round runs the closed-loop cells of
# bench-peers.sh's overhead part (16 clients, then 1 client, non-streamed, --max-tokens 16) through each
# gateway, alternating which goes first. CPU per request is each process's CPU time over the cell
# (/proc/<pid>/stat; Postgres: every backend of the database) ÷ completed requests; every cell is
# reconciled against the ledger.
#
#   scripts/bench-gateway-ab.sh OLD_GATEWAY NEW_GATEWAY        # binaries, e.g. release builds of two commits
#
# Knobs: AB_ROUNDS (3), AB_SECONDS (10 per cell). Needs Postgres and Redis as bench-peers.sh does; uses the
# database runaii_bench_ab and Redis database 9. Raw JSON per cell goes to .data/bench-ab/<timestamp>/.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"
say() { echo "bench-gateway-ab: $*" >&2; }
die() { say "$*"; exit 1; }

[ $# -eq 2 ] || die "usage: $0 OLD_GATEWAY NEW_GATEWAY"
old="$(realpath "$1")" new="$(realpath "$2")"
rounds="${AB_ROUNDS:-3}" seconds="${AB_SECONDS:-10}"
out="$root/.data/bench-ab/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
gateway_port=28480 mock_port=28481
base_url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/runaii}"
export DATABASE_URL="${base_url%/*}/runaii_bench_ab" REDIS_URL="redis://127.0.0.1:6379/9"
export RUNAII_WORKER_SECRET="ab-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"

say "building loadtest and mock-worker (release)"
cargo build --locked --release -p runaii-loadtest 2>/dev/null
lt="$CARGO_TARGET_DIR/release/loadtest"
cp "$old" "$out/gw-old"; cp "$new" "$out/gw-new"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

psql -X -q -d "${base_url%/*}/postgres" -c 'DROP DATABASE IF EXISTS runaii_bench_ab WITH (FORCE)' -c 'CREATE DATABASE runaii_bench_ab' >/dev/null
redis-cli -u "$REDIS_URL" flushdb >/dev/null
gw="$out/gw-new"
bench_tenant "$gw" "$mock_port" "$out/api-key" ab

"$CARGO_TARGET_DIR/release/mock-worker" --listen "127.0.0.1:$mock_port" --model mock-model --tokens 16 --tcp-nodelay >"$out/mock.log" 2>&1 &
mock_pid=$!; pids+=("$mock_pid")
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$mock_port/health" >/dev/null && break; sleep 0.1; done

redis_pid="$(redis-cli -u "$REDIS_URL" info server | tr -d '\r' | awk -F: '$1 == "process_id" {print $2}')"
[ -r "/proc/$redis_pid/stat" ] || die "cannot read Redis' CPU time (pid '$redis_pid'): is it on this machine?"

# Transactions committed in the benchmark's database so far (every statement's, the ledger's and the rest).
commits() { psql -X -q -d "$DATABASE_URL" -tAc "SELECT xact_commit FROM pg_stat_database WHERE datname = 'runaii_bench_ab'"; }

run_cell() { # run_cell <label> <gateway binary> <clients>
  local label="$1" bin="$2" clients="$3" gw_pid pg_pids b_gw b_pg b_rd a_gw a_pg a_rd file
  "$bin" serve --listen "127.0.0.1:$gateway_port" --default-rpm 100000000 --default-tpm 4000000000 >>"$out/gateway-$label.log" 2>&1 &
  gw_pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$gateway_port/health" >/dev/null && break; sleep 0.1; done
  "$lt" --base-url "http://127.0.0.1:$gateway_port" --api-key-file "$out/api-key" --model mock-model --mix plain=1 \
    --concurrency 32 --requests 2000 --no-reconcile >/dev/null
  pg_pids="$(psql -X -q -d "$DATABASE_URL" -tAc "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE datname = 'runaii_bench_ab' AND pid <> pg_backend_pid()")"
  b_gw=$(cpu_ticks "$gw_pid"); b_pg=$(cpu_ticks $pg_pids); b_rd=$(cpu_ticks "$redis_pid"); b_tx=$(commits)
  file="$out/$label-c$clients-$(date +%s).json"
  "$lt" --base-url "http://127.0.0.1:$gateway_port" --api-key-file "$out/api-key" --database-url "$DATABASE_URL" --settle-timeout 30s \
    --model mock-model --mix plain=1 --max-tokens 16 --timeout 30s --json --concurrency "$clients" --duration "${seconds}s" >"$file"
  a_gw=$(cpu_ticks "$gw_pid"); a_pg=$(cpu_ticks $pg_pids); a_rd=$(cpu_ticks "$redis_pid")
  kill -TERM "$gw_pid"; wait "$gw_pid" 2>/dev/null || true
  # Read once the gateway's connections have closed: a backend reports its counts when it exits.
  sleep 1; a_tx=$(commits)
  python3 - "$file" "$label" "$clients" "$((a_gw - b_gw))" "$((a_pg - b_pg))" "$((a_rd - b_rd))" "$(getconf CLK_TCK)" "$((a_tx - b_tx))" <<'PY'
import json, sys
file, label, clients, gw, pg, rd, hz, tx = sys.argv[1:9]
r = json.load(open(file)); s = r.get("summary") or r
n = max(s.get("completed", 0), 1); lat = s.get("latency") or {}
rec = r.get("reconciliation") or {}
print(f"{label} {clients:>2} clients: {s.get('completed_per_s', 0):7.0f} req/s  p50 {lat.get('p50_ms')} ms  p99 {lat.get('p99_ms')} ms  "
      f"gateway {int(gw) / int(hz) * 1e6 / n:.0f} us/req  postgres {int(pg) / int(hz) * 1e6 / n:.0f} us/req  "
      f"redis {int(rd) / int(hz) * 1e6 / n:.0f} us/req  postgres commits {int(tx) / n:.3f}/req  "
      f"reconciled: {'yes' if rec and not rec.get('discrepancies') else 'NO'}")
PY
}

for round in $(seq "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
  for label in $order; do run_cell "$label" "$out/gw-$label" 16 | tee -a "$out/report.txt"; done
  for label in $order; do run_cell "$label" "$out/gw-$label" 1 | tee -a "$out/report.txt"; done
done
say "report: $out/report.txt"
