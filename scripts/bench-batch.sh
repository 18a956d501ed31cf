#!/usr/bin/env bash
# The Batch API on one worker beside online traffic (docs/benchmarks.md, "Batch API"): a gateway and one
# worker (2 threads, 8 sequences), and scripts/bench_batch.py measuring, in one run,
#
#   best   the worker's best aggregate completion tokens/s: 8 clients sending the batch's own lines online;
#   alone  the p50 latency of one online invoice request, nothing else running;
#   batch  a 2,000-line batch of the same invoice extractions: its completion tokens/s (in_progress_at to
#          completed_at), and the p50 of the same online requests sent beside it, one every 5 s.
#
# Needs Postgres and Redis as scripts/run.sh does (DATABASE_URL's server, REDIS_URL); uses its own database
# (runaii_bench_batch, recreated) and Redis database (10). Results (report.json, logs) go to
# .data/bench-batch/<timestamp>/. Knobs: BENCH_PROFILE (debug, the build scripts/test.sh makes, or
# release), BENCH_LINES (2000), BENCH_SECONDS (90, the best phase), BENCH_PROBES (20),
# BENCH_PROBE_GAP_S (5), BENCH_BESIDE (1; 0: no online request beside the batch), BENCH_PHASES
# ("best alone batch"; add "same" to send the batch's first BENCH_SAME (40) lines again online and count
# the answers identical to the batch's), BENCH_THREADS (2). Each phase reports the cores the worker, the gateway and
# Postgres used, and from the worker's /metrics how busy its sequences were and on how many threads.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"

out="${BENCH_OUT:-$root/.data/bench-batch/$(date -u +%Y%m%dT%H%M%SZ)}"
profile="${BENCH_PROFILE:-debug}"
worker_port=18481 gateway_port=18490
mkdir -p "$out"
say() { echo "bench-batch: $*" >&2; }
die() { say "$*"; exit 1; }
cleanup() {
  local running
  running="$(jobs -pr)"
  [ -z "$running" ] || { kill $running 2>/dev/null || true; wait 2>/dev/null || true; }
}
trap cleanup EXIT

for port in "$worker_port" "$gateway_port"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then die "127.0.0.1:$port is in use: stop what listens there"; fi
done
command -v psql >/dev/null && command -v redis-cli >/dev/null || die "psql and redis-cli are needed (scripts/run.sh installs them)"

ensure_build_tools
scripts/fetch-model.sh >/dev/null
say "building ($profile)"
# The debug build as scripts/test.sh makes it (the same packages and targets: nothing rebuilt after it).
flags=(--locked --workspace --all-targets)
[ "$profile" = release ] && flags=(--locked --release -p runaii-gateway -p runaii-worker)
cargo build "${flags[@]}" >&2
mkdir -p "$out/bin"
for b in runaii-worker runaii-gateway; do cp "$CARGO_TARGET_DIR/$profile/$b" "$out/bin/"; done
bin="$out/bin"

base_url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/runaii}"
export DATABASE_URL="${base_url%/*}/runaii_bench_batch"
export REDIS_URL="${BENCH_REDIS_URL:-redis://127.0.0.1:6379/10}"
pg_isready -q -d "$DATABASE_URL" -t 3 || die "Postgres at ${base_url%/*} does not answer (start it, e.g. with scripts/run.sh)"
[ "$(redis-cli -u "$REDIS_URL" ping)" = PONG ] || die "Redis at $REDIS_URL does not answer"
psql -X -q -d "${base_url%/*}/postgres" -c 'DROP DATABASE IF EXISTS runaii_bench_batch WITH (FORCE)' -c 'CREATE DATABASE runaii_bench_batch' >/dev/null
redis-cli -u "$REDIS_URL" flushdb >/dev/null
RUNAII_WORKER_SECRET="bench-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export RUNAII_WORKER_SECRET
unset RUNAII_WORKER_SECRET_FILE

gw="$bin/runaii-gateway"
RUST_LOG=error "$gw" migrate >/dev/null
RUST_LOG=error "$gw" upsert-model --id smollm2-135m-instruct --context-length 4096 --input-price 0.10 --output-price 0.30 \
  --worker-url "http://127.0.0.1:$worker_port" >/dev/null
RUST_LOG=error "$gw" create-key --tenant bench --name "bench-$(date +%s)" | tail -n 1 >"$out/api-key"
RUST_LOG=error "$gw" grant-credits --tenant bench --amount 1000 >/dev/null

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- worker gateway wire || echo ' (+ uncommitted changes)')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs"
  echo "profile: $profile; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/env.txt"

threads="${BENCH_THREADS:-2}"
"$bin/runaii-worker" --model-path "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" --listen "127.0.0.1:$worker_port" \
  --threads "$threads" --slots 8 --ctx-per-slot 4096 >"$out/worker.log" 2>&1 &
worker_pid=$!
wait_http "http://127.0.0.1:$worker_port/health" "$worker_pid" 180
# Rate limits far above the load: the online phases measure the worker, not the limiter.
"$gw" serve --listen "127.0.0.1:$gateway_port" --default-rpm 100000000 --default-tpm 4000000000 >"$out/gateway.log" 2>&1 &
gateway_pid=$!
wait_http "http://127.0.0.1:$gateway_port/health" "$gateway_pid" 60
until curl -sf -H "authorization: Bearer $(cat "$out/api-key")" "http://127.0.0.1:$gateway_port/v1/models" | grep -q smollm2; do
  kill -0 "$gateway_pid" || die "the gateway exited (log: $out/gateway.log)"
  sleep 0.5
done

say "worker: $threads threads, 8 sequences; results in $out"
BENCH_GATEWAY="http://127.0.0.1:$gateway_port" BENCH_KEY="$(cat "$out/api-key")" BENCH_PIDS="worker:$worker_pid gateway:$gateway_pid" \
  BENCH_WORKER="http://127.0.0.1:$worker_port" \
  python3 scripts/bench_batch.py >"$out/report.json"
cat "$out/env.txt" "$out/report.json"
