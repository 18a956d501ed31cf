#!/usr/bin/env bash
# Brings up a worker serving the embedded model on 127.0.0.1:8081 (RUNAII_WORKER_ADDR to change it).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"
ensure_build_tools
scripts/fetch-model.sh
cargo build --locked -p runaii-worker
addr="${RUNAII_WORKER_ADDR:-127.0.0.1:8081}"
cat <<MSG
worker starting on http://$addr — try:
  curl -s http://$addr/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model":"smollm2-135m-instruct","messages":[{"role":"user","content":"Capital of France?"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}}'
MSG
exec "$CARGO_TARGET_DIR/debug/runaii-worker" --listen "$addr" "$@"
