#!/usr/bin/env bash
# Fuzzes the running gateway against its OpenAPI document (openapi/openapi.json) with Schemathesis:
# no 5xx, and every answer's status, content type and body as the document declares.
#
# Starts a private stack like tests/sdk/conftest.py does: a fresh database on the Postgres server at
# $DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres, used as admin), migrated, with the
# embedded model in the catalog; a worker and a gateway on free ports; a tenant with a key and credit;
# an admin JWT with every role. Postgres and Redis ($REDIS_URL, default redis://127.0.0.1:6379) must
# answer (scripts/run.sh starts private ones when they do not). Everything is stopped and the database
# dropped at the end. Schemathesis runs from a virtualenv at ~/.cache/runaii/venv-fuzz.
#
#   FUZZ_MAX_EXAMPLES  test cases per operation and phase (default 10)
#   FUZZ_MAX_TOKENS    output token limit put on every inference request (default 8; tests/fuzz/hooks.py)
#   FUZZ_SEED          Schemathesis' random seed, to replay a run
#   FUZZ_OPERATIONS    a regex of paths to fuzz (default: all), e.g. '^/admin/'
# Arguments go to `schemathesis run`. Logs and reports: the directory printed at the start.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"

say() { echo "fuzz-api: $*"; }
die() { echo "fuzz-api: $*" >&2; exit 1; }

ensure_build_tools
scripts/fetch-model.sh
cargo build --locked -p runaii-worker -p runaii-gateway
worker_bin="$CARGO_TARGET_DIR/debug/runaii-worker"
gateway_bin="$CARGO_TARGET_DIR/debug/runaii-gateway"
model_id="smollm2-135m-instruct"
model_path="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"

# Schemathesis, installed again only when tests/fuzz/requirements.txt changed.
venv="${RUNAII_VENV_FUZZ:-$HOME/.cache/runaii/venv-fuzz}"
if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  command -v python3 >/dev/null || die "python3 is needed (apt-get install -y python3 python3-venv)"
  rm -rf "$venv"
  python3 -m venv "$venv" || die "python3 -m venv failed (apt-get install -y python3-venv)"
fi
stamp="$venv/.runaii-requirements.sha256"
want="$(sha256sum tests/fuzz/requirements.txt | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/fuzz/requirements.txt
  echo "$want" >"$stamp"
fi

command -v psql >/dev/null || die "psql is needed (apt-get install -y postgresql-client)"
admin_url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
admin_url="${admin_url%/*}/postgres"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"
psql -X -q -d "$admin_url" -c 'SELECT 1' >/dev/null 2>&1 || die "Postgres at $admin_url does not answer (scripts/run.sh starts one)"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

logs="$(mktemp -d /tmp/runaii-fuzz.XXXXXX)"
db_name="runaii_fuzz_$(date +%s)_$RANDOM"
export DATABASE_URL="${admin_url%/*}/$db_name"
export RUST_LOG="${RUST_LOG:-warn}" NO_COLOR=1 RUNAII_PROBE_MS=300
# Fuzzing sends far more requests a minute than a customer: the limiter would answer most with 429.
export RUNAII_DEFAULT_RPM=1000000 RUNAII_DEFAULT_TPM=1000000000
export RUNAII_ADMIN_JWT_SECRET="fuzz-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export RUNAII_WORKER_SECRET="fuzz-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  psql -X -q -d "$admin_url" -c "DROP DATABASE IF EXISTS \"$db_name\" WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

say "logs and reports in $logs"
psql -X -q -d "$admin_url" -c "CREATE DATABASE \"$db_name\"" >/dev/null
cli() { RUST_LOG=error "$gateway_bin" "$@" | tail -n 1; }
worker_port="$(free_port)"
gateway_port="$(free_port)"
worker_url="http://127.0.0.1:$worker_port"
base="http://127.0.0.1:$gateway_port"
cli migrate >/dev/null
cli upsert-model --id "$model_id" --context-length 4096 --input-price 0.10 --output-price 0.30 \
  --worker-url "$worker_url" --supports-tools true >/dev/null
export RUNAII_FUZZ_API_KEY="$(cli create-key --tenant fuzz --name schemathesis)"
cli grant-credits --tenant fuzz --amount 1000 >/dev/null
export RUNAII_FUZZ_ADMIN_TOKEN="$(cli issue-admin-token --subject schemathesis --ttl-hours 4)"
# Scratch twins of the run's tenant, key and model: tests/fuzz/hooks.py sends changes aimed at the
# originals (whose ids the fuzzer reads from list answers) to these instead.
cli create-key --tenant fuzz-scratch --name scratch >/dev/null
cli upsert-model --id fuzz-scratch-model --context-length 4096 --input-price 0.10 --output-price 0.30 >/dev/null
export RUNAII_FUZZ_MODEL="$model_id" RUNAII_FUZZ_SCRATCH_MODEL=fuzz-scratch-model
ids() { psql -X -q -tA -d "$DATABASE_URL" -c "SELECT t.id || ' ' || k.id FROM tenants t JOIN api_keys k ON k.tenant_id = t.id WHERE t.name = '$1'"; }
read -r RUNAII_FUZZ_TENANT_ID RUNAII_FUZZ_KEY_ID <<<"$(ids fuzz)"
read -r RUNAII_FUZZ_SCRATCH_TENANT_ID RUNAII_FUZZ_SCRATCH_KEY_ID <<<"$(ids fuzz-scratch)"
export RUNAII_FUZZ_TENANT_ID RUNAII_FUZZ_KEY_ID RUNAII_FUZZ_SCRATCH_TENANT_ID RUNAII_FUZZ_SCRATCH_KEY_ID

"$worker_bin" --model-path "$model_path" --model-id "$model_id" --listen "127.0.0.1:$worker_port" \
  >"$logs/worker.log" 2>&1 &
pids+=($!)
"$gateway_bin" serve --listen "127.0.0.1:$gateway_port" >"$logs/gateway.log" 2>&1 &
pids+=($!)

wait_for() {
  local what="$1" url="$2" seconds="$3" pattern="${4:-}"
  for _ in $(seq "$((seconds * 5))"); do
    if body="$(curl -sf "$url" 2>/dev/null)" && [[ -z "$pattern" || "$body" == *"$pattern"* ]]; then return 0; fi
    sleep 0.2
  done
  tail -n 30 "$logs/$what.log" >&2
  die "$what not ready at $url after $seconds s"
}
wait_for worker "$worker_url/health" 180
wait_for gateway "$base/health" 60
# The gateway probes its workers every RUNAII_PROBE_MS: wait until it routes to ours.
wait_for gateway "$base/v1/models/$model_id" 30 '"is_ready":true'

filter=()
[ -n "${FUZZ_OPERATIONS:-}" ] && filter=(--include-path-regex "$FUZZ_OPERATIONS")
seed=()
[ -n "${FUZZ_SEED:-}" ] && seed=(--seed "$FUZZ_SEED")

say "fuzzing $base"
# From the logs directory, so Schemathesis' example database stays out of the clone. No stateful phase:
# it chains operations (list a tenant's keys, then revoke one), and revoking the fuzzing key would turn
# the rest of the run into 401s.
cd "$logs"
status=0
SCHEMATHESIS_HOOKS="$root/tests/fuzz/hooks.py" "$venv/bin/schemathesis" --config-file "$root/tests/fuzz/schemathesis.toml" \
  run "$root/openapi/openapi.json" --url "$base" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  --phases examples,coverage,fuzzing --workers 1 --max-examples "${FUZZ_MAX_EXAMPLES:-10}" \
  --request-timeout 120 --report junit,ndjson --report-dir "$logs/report" \
  "${filter[@]}" "${seed[@]}" "$@" || status=$?
if grep -q -E ' (ERROR|WARN) ' "$logs/gateway.log"; then
  say "the gateway logged errors or warnings (last 20 lines of $logs/gateway.log):"
  grep -E ' (ERROR|WARN) ' "$logs/gateway.log" | tail -n 20
fi
exit "$status"
