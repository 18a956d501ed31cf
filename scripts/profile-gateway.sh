#!/usr/bin/env bash
# One gateway binary behind the mock worker, for profiling and quick pairs (docs/benchmarks.md, "Gateway overhead"):
# prints req/s, p50/p99, the gateway's CPU per request, and the ledger writer's commits per request and
# how its waits ended (runaii_gateway_ledger_waits_total), and how busy the whole machine was over one
# load cell; with PROFILE=perf it also records `perf record --call-graph dwarf` of the gateway over the
# cell (.data/profile/perf.data). Run two builds in turn to compare them; scripts/bench-gateway-ab.sh is
# the full A/B.
#
#   scripts/profile-gateway.sh GATEWAY_BIN [CLIENTS|rRATE] [SECONDS] [MIX]
#   scripts/profile-gateway.sh target/release/runaii-gateway 16 8           # 16 closed-loop clients
#   scripts/profile-gateway.sh target/release/runaii-gateway 1 6 stream     # one client, streamed
#   scripts/profile-gateway.sh target/release/runaii-gateway r2700 10       # open loop at 2,700/s
#
# Knobs: PROFILE=perf, GATEWAY_ARGS (extra `serve` flags, e.g. "--ledger-linger-us 0"). Needs Postgres and
# Redis as bench-peers.sh does; uses the database runaii_profile and Redis database 8.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"
say() { echo "profile-gateway: $*" >&2; }
[ $# -ge 1 ] || { say "usage: $0 GATEWAY_BIN [CLIENTS|rRATE] [SECONDS] [MIX]"; exit 1; }
gw="$(realpath "$1")" load="${2:-16}" seconds="${3:-8}" mix="${4:-plain}"
out="$root/.data/profile"; mkdir -p "$out"
gateway_port=28580 mock_port=28581 metrics_port=28582
base_url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/runaii}"
export DATABASE_URL="${base_url%/*}/runaii_profile" REDIS_URL="redis://127.0.0.1:6379/8"
export RUNAII_WORKER_SECRET="profile-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
cargo build --locked --release -p runaii-loadtest 2>/dev/null
lt="$CARGO_TARGET_DIR/release/loadtest"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

psql -X -q -d "${base_url%/*}/postgres" -c 'DROP DATABASE IF EXISTS runaii_profile WITH (FORCE)' -c 'CREATE DATABASE runaii_profile' >/dev/null 2>&1
redis-cli -u "$REDIS_URL" flushdb >/dev/null
bench_tenant "$gw" "$mock_port" "$out/api-key" profile

"$CARGO_TARGET_DIR/release/mock-worker" --listen "127.0.0.1:$mock_port" --model mock-model --tokens 16 --tcp-nodelay >"$out/mock.log" 2>&1 &
pids+=($!)
# shellcheck disable=SC2086 # GATEWAY_ARGS is a list of flags
"$gw" serve --listen "127.0.0.1:$gateway_port" --metrics-listen "127.0.0.1:$metrics_port" ${GATEWAY_ARGS:-} --default-rpm 100000000 --default-tpm 4000000000 >"$out/gateway.log" 2>&1 &
gw_pid=$!; pids+=("$gw_pid")
for port in "$mock_port" "$gateway_port"; do
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
done
"$lt" --base-url "http://127.0.0.1:$gateway_port" --api-key-file "$out/api-key" --model mock-model --mix "$mix=1" \
  --concurrency 32 --requests 2000 --no-reconcile >/dev/null

if [ "${load#r}" != "$load" ]; then mode=(--rate "${load#r}"); else mode=(--concurrency "$load"); fi
# The writer's counters, one `name{label} value` line each.
ledger() { curl -sf "http://127.0.0.1:$metrics_port/metrics" | grep -E '^runaii_gateway_ledger_(commits|waits)_total' || true; }
ledger >"$out/ledger-before"
before=$(cpu_ticks "$gw_pid")
# The whole machine's busy and total jiffies (load generator, mock and Postgres included): how much of the
# two cores the cell used, which is what queueing grows with. Busy as bench_peers.py's machine_busy counts
# it (steal included: time the machine could not have); not bench_peers.py itself, which needs bench-peers'
# virtualenv.
machine() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
machine_before=$(machine)
if [ "${PROFILE:-}" = perf ]; then
  perf record -F 1000 --call-graph dwarf,32768 -o "$out/perf.data" -p "$gw_pid" -- sleep "$seconds" 2>/dev/null &
  perf_pid=$!
fi
"$lt" --base-url "http://127.0.0.1:$gateway_port" --api-key-file "$out/api-key" --model mock-model --mix "$mix=1" \
  --max-tokens 16 --timeout 30s --json --no-reconcile "${mode[@]}" --duration "${seconds}s" >"$out/loadtest.json"
after=$(cpu_ticks "$gw_pid")
machine_after=$(machine)
ledger >"$out/ledger-after"
[ -n "${perf_pid:-}" ] && { wait "$perf_pid" || true; say "profile: $out/perf.data (perf report -i $out/perf.data)"; }
python3 - "$out/loadtest.json" "$((after - before))" "$(getconf CLK_TCK)" "$out/ledger-before" "$out/ledger-after" "$machine_before" "$machine_after" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); s = r.get("summary") or r
n = max(s.get("completed", 0), 1); lat = s.get("latency") or {}
cpu_us = int(sys.argv[2]) / int(sys.argv[3]) * 1e6 / n
def counters(path):
    lines = (line.rsplit(" ", 1) for line in open(path) if line.strip())
    return {name: float(value) for name, value in lines}
before, after = counters(sys.argv[4]), counters(sys.argv[5])
delta = {k: v - before.get(k, 0) for k, v in after.items()}
commits = sum(v for k, v in delta.items() if k.startswith("runaii_gateway_ledger_commits_total"))
ended = lambda name: name.split('ended="')[1].split('"')[0]
waits = " ".join(f"{ended(k)} {v:.0f}" for k, v in sorted(delta.items()) if "waits" in k and v)
(busy0, total0), (busy1, total1) = (map(int, a.split()) for a in sys.argv[6:8])
busy = 100 * (busy1 - busy0) / max(total1 - total0, 1)
print(f"{s.get('completed_per_s', 0):.0f} req/s  p50 {lat.get('p50_ms')} ms  p99 {lat.get('p99_ms')} ms  gateway {cpu_us:.0f} us/req"
      f"  commits/req {commits / n:.3f}  waits ended: {waits or 'none'}  machine busy {busy:.0f}%")
PY
