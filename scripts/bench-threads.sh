#!/usr/bin/env bash
# The worker's adaptive threads, A/B (docs/benchmarks.md, "The worker adapting its threads"): the worker
# with --adapt-threads false, then true, each quiet and then beside one busy loop, measured with
# examples/bench (tokens/s at 1, 4 and 8 streams). Debug profile (llama.cpp optimised); run it on a quiet
# machine. BENCH_THREADS (2: decoding threads), BENCH_PORT (18181).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
cargo build --workspace --bins --examples
bin="$CARGO_TARGET_DIR/debug"
threads="${BENCH_THREADS:-2}"
port="${BENCH_PORT:-18181}"
export RUNAII_WORKER_SECRET="bench-threads-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
token="$("$bin/runaii-gateway" worker-token)"
metrics() { curl -s -H "authorization: Bearer $token" "localhost:$port/metrics" | grep -E '^runaii_worker_(decode_threads|decode_thread_switches_total|other_processes)'; }
for adapt in false true; do
  "$bin/runaii-worker" --listen "127.0.0.1:$port" --threads "$threads" --adapt-threads "$adapt" --accept-bearer >/dev/null 2>&1 &
  worker=$!
  trap 'kill $worker 2>/dev/null || true' EXIT
  until curl -sf "localhost:$port/health" >/dev/null; do sleep 0.5; done
  for load in quiet busy; do
    spinner=""
    if [ "$load" = busy ]; then sh -c 'while :; do :; done' & spinner=$!; sleep 3; fi
    echo "=== adapt=$adapt load=$load $(date -u +%T) loadavg=$(cut -d' ' -f1 /proc/loadavg)"
    RUNAII_WORKER_TOKEN="$token" "$bin/examples/bench" --url "http://127.0.0.1:$port" --rounds 1 --skip-compile | grep -E '^\|'
    metrics
    if [ -n "$spinner" ]; then kill "$spinner"; sleep 3; fi
  done
  kill "$worker"; wait "$worker" 2>/dev/null || true
done
