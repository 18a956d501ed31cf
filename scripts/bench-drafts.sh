#!/usr/bin/env bash
# Prompt-lookup drafts on and off (docs/benchmarks.md, "Prompt-lookup drafts"): the same worker binary
# with --draft-max 0 and --draft-max 8, one at a time, on the constrained cells of scripts/bench-peers.sh
# (invoice and order-form extraction, one and eight at once; the long answer, one and eight at once),
# BENCH_PASSES passes (2), the order of the two swapped every pass. Each worker's draft and decode-step
# counters are printed after its cells. Raw JSON per cell and report.md go to .data/bench-drafts/<timestamp>/.
#
#   scripts/bench-drafts.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"

passes="${BENCH_PASSES:-2}"
port=18391
out="$root/.data/bench-drafts/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
cache="$HOME/.cache/runaii"
ensure_venv "$cache/venv-bench" --quiet "jsonschema==$JSONSCHEMA_VERSION"
py="$cache/venv-bench/bin/python"

ensure_build_tools
llama_cpu_env
scripts/fetch-model.sh >/dev/null
cargo build --locked --workspace --bins
bin="$CARGO_TARGET_DIR/debug"
RUNAII_WORKER_SECRET="bench-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export RUNAII_WORKER_SECRET
unset RUNAII_WORKER_SECRET_FILE
RUNAII_WORKER_TOKEN="$(RUST_LOG=error "$bin/runaii-gateway" worker-token)"
export RUNAII_WORKER_TOKEN

cells=("invoice 1 4 64" "invoice 8 1 64" "form 1 4 200" "form 8 1 200" "story 1 2 128" "story 8 1 128")
for pass in $(seq "$passes"); do
  order=(0 8)
  [ $((pass % 2)) -eq 0 ] && order=(8 0)
  for max in "${order[@]}"; do
    "$bin/runaii-worker" --model-path models/SmolLM2-135M-Instruct.Q4_1.gguf --listen "127.0.0.1:$port" \
      --threads 2 --slots 8 --ctx-per-slot 4096 --accept-bearer --draft-max "$max" >"$out/worker-$pass-$max.log" 2>&1 &
    pid=$!
    until curl -sf "127.0.0.1:$port/health" >/dev/null; do
      kill -0 "$pid" 2>/dev/null || { tail -n 20 "$out/worker-$pass-$max.log" >&2; exit 1; }
      sleep 0.5
    done
    # Warm-up (page cache, schema compile), not measured.
    "$py" scripts/bench_peers.py constrained --url "http://127.0.0.1:$port" --engine warm-up --request form \
      --first 999 --out /dev/null >/dev/null
    first=$((pass * 100))
    for cell in "${cells[@]}"; do
      read -r request concurrency rounds max_tokens <<<"$cell"
      "$py" scripts/bench_peers.py wait-quiet --below 0.3 --max-s 60 >/dev/null
      "$py" scripts/bench_peers.py constrained --url "http://127.0.0.1:$port" --engine "draft-max-$max" \
        --pass-no "$pass" --pid "$pid" --request "$request" --concurrency "$concurrency" --rounds "$rounds" \
        --max-tokens "$max_tokens" --first "$first" --out "$out/$pass-$max-$request-$concurrency.json" >/dev/null
      first=$((first + 10))
    done
    echo "pass $pass, --draft-max $max: $(curl -s "127.0.0.1:$port/metrics" \
      | grep -E '^runaii_worker_(draft_tokens|draft_accepted_tokens|decode_steps|completion_tokens)_total' | tr '\n' ' ')" \
      | tee -a "$out/counters.txt"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
"$py" scripts/bench_peers.py report "$out" | tee "$out/report.md"
