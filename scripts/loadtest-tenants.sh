#!/usr/bin/env bash
# Two tenants on one model: does one tenant's flood slow the other down? A private stack (one worker on
# the embedded model, one gateway, its own database and Redis database) and three phases:
#   1. quiet:  the short tenant alone: LT_SHORT_REQUESTS one-line requests, one client;
#   2. flood:  the flooding tenant alone: LT_FLOOD clients of long constrained answers for LT_SECONDS;
#   3. both:   the flood again, and once it has filled the worker, the short tenant's requests as in 1.
# Prints the short tenant's p50/p99 quiet and under the flood, and the aggregate output tokens/s with and
# without the short tenant. Targets: p50 under the flood within 1.5x of quiet; aggregate tokens/s within
# 10% of the flood alone. Output: .data/loadtest-tenants/<time>/ (logs, the three JSON reports).
#
# Environment: LT_SECONDS (60), LT_FLOOD (32, the tenant cap's default), LT_LONG_TOKENS (200),
# LT_SHORT_REQUESTS (20), LT_PROFILE (debug|release, default debug: the build scripts/test.sh makes),
# DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432), REDIS_URL (default
# redis://127.0.0.1:6379/9).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"

seconds="${LT_SECONDS:-60}" flood="${LT_FLOOD:-32}" long_tokens="${LT_LONG_TOKENS:-200}" shorts="${LT_SHORT_REQUESTS:-20}"
profile="${LT_PROFILE:-debug}"
out="$root/.data/loadtest-tenants/$(date -u +%Y%m%dT%H%M%SZ)"
server="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/runaii}"; server="${server%/*}"
database="runaii_tenants_$(date +%s)"
export DATABASE_URL="$server/$database"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/9}"
RUNAII_WORKER_SECRET="tenants-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export RUNAII_WORKER_SECRET
unset RUNAII_WORKER_SECRET_FILE
worker_port=18591 gateway_port=18590
model=smollm2-135m-instruct

say() { echo "loadtest-tenants: $*" >&2; }
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
  local deadline=$((SECONDS + 120))
  until [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" || true)" = 200 ]; do
    [ "$SECONDS" -lt "$deadline" ] || die "$1 did not answer 200 within 120 s (logs in $out)"
    sleep 0.2
  done
}
command -v psql >/dev/null && command -v curl >/dev/null || die "psql and curl are needed"
pg_isready -q -d "$server/postgres" -t 3 || die "Postgres at $server does not answer"

flags=(--locked --workspace --all-targets)
[ "$profile" = release ] && flags=(--locked --release -p runaii-gateway -p runaii-worker -p runaii-loadtest)
say "building ($profile)"
cargo build "${flags[@]}" >&2
bin="$CARGO_TARGET_DIR/$profile"

psql -X -q -d "$server/postgres" -c "CREATE DATABASE $database" >/dev/null
gw="$bin/runaii-gateway"
RUST_LOG=error "$gw" migrate >/dev/null
RUST_LOG=error "$gw" upsert-model --id "$model" --context-length 4096 --input-price 0.10 --output-price 0.30 \
  --worker-url "http://127.0.0.1:$worker_port" >/dev/null
for tenant in flood short; do
  RUST_LOG=error "$gw" create-key --tenant "$tenant" --name loadtest | tail -n 1 >"$out/$tenant-key"
  RUST_LOG=error "$gw" grant-credits --tenant "$tenant" --amount 1000 >/dev/null
done

"$bin/runaii-worker" --model-path models/SmolLM2-135M-Instruct.Q4_1.gguf --model-id "$model" \
  --listen "127.0.0.1:$worker_port" >"$out/worker.log" 2>&1 &
wait_http "http://127.0.0.1:$worker_port/health"
"$gw" serve --listen "127.0.0.1:$gateway_port" --default-rpm 1000000 --default-tpm 1000000000 >"$out/gateway.log" 2>&1 &
wait_http "http://127.0.0.1:$gateway_port/health"

load() { # tenant, report name, loadtest flags…
  local tenant="$1" name="$2"; shift 2
  "$bin/loadtest" --base-url "http://127.0.0.1:$gateway_port" --api-key-file "$out/$tenant-key" --model "$model" \
    --no-reconcile --json --timeout 600s "$@" >"$out/$name.json" 2>"$out/$name.log"
}
short_flags=(--concurrency 1 --requests "$shorts" --mix plain=1 --max-tokens 8)
flood_flags=(--concurrency "$flood" --duration "${seconds}s" --mix long=1 --max-tokens "$long_tokens")

say "1/3 quiet: $shorts short requests alone"
load short quiet "${short_flags[@]}"
say "2/3 flood alone: $flood clients of $long_tokens-token constrained answers for $seconds s"
load flood flood-alone "${flood_flags[@]}"
say "3/3 both: the flood again, and the short requests once the worker is full"
load flood flood-both "${flood_flags[@]}" &
flooding=$!
sleep "$(( seconds / 6 ))"
load short short-both "${short_flags[@]}"
wait "$flooding"

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
r = {n: json.load(open(f"{out}/{n}.json"))["summary"] for n in ("quiet", "flood-alone", "flood-both", "short-both")}
def lat(n): return r[n]["latency"] or {"p50_ms": float("nan"), "p99_ms": float("nan")}
q, b = lat("quiet"), lat("short-both")
alone = r["flood-alone"]["output_tokens_per_s"]
both = r["flood-both"]["output_tokens_per_s"] + r["short-both"]["output_tokens"] / max(r["flood-both"]["elapsed_s"], 1e-9)
print(f"short tenant, quiet:       p50 {q['p50_ms']:.0f} ms  p99 {q['p99_ms']:.0f} ms  ({r['quiet']['completed']} completed)")
print(f"short tenant, under flood: p50 {b['p50_ms']:.0f} ms  p99 {b['p99_ms']:.0f} ms  ({r['short-both']['completed']} completed, errors {r['short-both']['errors']})")
print(f"p50 under flood / quiet: {b['p50_ms'] / q['p50_ms']:.2f}x (target <= 1.5x)")
print(f"flood alone: {alone:.1f} output tok/s ({r['flood-alone']['completed']} completed, errors {r['flood-alone']['errors']})")
print(f"flood + short: {both:.1f} output tok/s ({r['flood-both']['completed']} completed, errors {r['flood-both']['errors']})")
print(f"aggregate with the short tenant / flood alone: {both / alone:.2f} (target >= 0.90)")
PY
say "reports: $out"
