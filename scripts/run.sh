#!/usr/bin/env bash
# Quickstart: brings up the whole stack with one command, and is safe to run again.
#
#   Postgres  $DATABASE_URL (default postgres://postgres@127.0.0.1:5432/runaii); when that server does not
#             answer, a private instance is started from the system packages: data in .data/pg,
#             127.0.0.1:55432, trust auth.
#   Redis     $REDIS_URL (default redis://127.0.0.1:6379); when it does not answer, a private
#             redis-server on 127.0.0.1:56379 (no persistence).
#   worker    http://127.0.0.1:8081 (RUNAII_WORKER_ADDR), log .data/worker.log
#   gateway   http://127.0.0.1:8080 (RUNAII_GATEWAY_ADDR), log .data/gateway.log
#
# The database is migrated, the embedded model is put in the catalog, and a demo tenant key is written to
# .data/demo-api-key (once). Processes already running are left alone; one running an older build of its
# binary is restarted. scripts/stop.sh stops everything this script started.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"

data="$root/.data"
mkdir -p "$data"
worker_addr="${RUNAII_WORKER_ADDR:-127.0.0.1:8081}"
gateway_addr="${RUNAII_GATEWAY_ADDR:-127.0.0.1:8080}"
model_id="smollm2-135m-instruct"
model_path="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
private_pg_port=55432
private_redis_port=56379

say() { echo "run: $*"; }
die() { echo "run: $*" >&2; exit 1; }

sudo_cmd() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Installs Debian packages, or says exactly what is missing when apt-get is not available.
apt_install() {
  if ! command -v apt-get >/dev/null; then
    die "missing: $* (no apt-get here: install the package(s) $* with your package manager)"
  fi
  say "installing $*"
  sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive sudo_cmd apt-get install -y -qq "$@" >/dev/null
}

# ---------------------------------------------------------------------------------------------------------
# 1. Build
ensure_build_tools
scripts/fetch-model.sh
cargo build --locked -p runaii-worker -p runaii-gateway -p runaii-cli
worker_bin="$CARGO_TARGET_DIR/debug/runaii-worker"
gateway_bin="$CARGO_TARGET_DIR/debug/runaii-gateway"
cli_bin="$CARGO_TARGET_DIR/debug/runaii"

# ---------------------------------------------------------------------------------------------------------
# 2. Postgres
command -v curl >/dev/null || apt_install curl
if ! command -v psql >/dev/null || ! command -v pg_isready >/dev/null; then apt_install postgresql-client; fi

pg_bin_dir() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return; fi
  command -v initdb >/dev/null && dirname "$(command -v initdb)"
}

# The private instance runs as a non-root user (initdb and postgres refuse root).
pg_user=""
[ "$(id -u)" -eq 0 ] && pg_user="postgres"
as_pg() { if [ -n "$pg_user" ]; then runuser -u "$pg_user" -- "$@"; else "$@"; fi; }

# Where the private instance keeps its data: .data/pg, unless the postgres user cannot reach the clone
# (a checkout under /root), then a directory of its own named after the clone.
private_pg_dir() {
  local dir="$data/pg"
  if [ -n "$pg_user" ] && ! runuser -u "$pg_user" -- test -x "$data"; then
    dir="/var/lib/postgresql/runaii-$(echo "$root" | sha256sum | cut -c1-12)"
  fi
  echo "$dir"
}

start_private_postgres() {
  local bin dir
  bin="$(pg_bin_dir)"
  if [ -z "$bin" ]; then
    apt_install postgresql
    bin="$(pg_bin_dir)"
    [ -n "$bin" ] || die "missing: initdb/pg_ctl/postgres (Debian package postgresql) after installing it"
  fi
  if [ -n "$pg_user" ] && ! id "$pg_user" >/dev/null 2>&1; then
    die "missing: a '$pg_user' user to run Postgres as (the Debian package postgresql creates it)"
  fi
  dir="$(private_pg_dir)"
  if [ ! -s "$dir/PG_VERSION" ]; then
    say "creating a private Postgres cluster in $dir"
    mkdir -p "$dir"
    chmod 700 "$dir"
    [ -n "$pg_user" ] && chown "$pg_user:" "$dir"
    as_pg "$bin/initdb" -D "$dir" -U postgres --auth=trust --encoding=UTF8 --no-locale >"$data/pg-initdb.log" 2>&1 \
      || { cat "$data/pg-initdb.log" >&2; die "initdb failed"; }
  fi
  say "starting the private Postgres on 127.0.0.1:$private_pg_port"
  # No unix socket: its default directory may not exist or be writable; TCP is all we need.
  as_pg "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$private_pg_port -c unix_socket_directories=''" start >/dev/null \
    || { tail -n 20 "$dir/server.log" >&2; die "the private Postgres did not start (log: $dir/server.log)"; }
  head -n 1 "$dir/postmaster.pid" >"$data/postgres.pid"
}

DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/runaii}"
if ! pg_isready -q -d "$DATABASE_URL" -t 3; then
  private_url="postgres://postgres@127.0.0.1:$private_pg_port/runaii"
  say "Postgres at $DATABASE_URL does not answer; using a private instance ($private_url)"
  pg_isready -q -h 127.0.0.1 -p "$private_pg_port" -t 2 || start_private_postgres
  DATABASE_URL="$private_url"
fi
export DATABASE_URL

# Create the database if it is missing: connect to the server's `postgres` database to do it.
db_name="${DATABASE_URL##*/}"
db_name="${db_name%%\?*}"
admin_url="${DATABASE_URL%/*}/postgres"
[ "${DATABASE_URL#*\?}" != "$DATABASE_URL" ] && admin_url="$admin_url?${DATABASE_URL#*\?}"
if [ -z "$(psql -X -q -d "$admin_url" -tAc "SELECT 1 FROM pg_database WHERE datname = '${db_name//\'/\'\'}'")" ]; then
  say "creating database $db_name"
  psql -X -q -d "$admin_url" -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"${db_name//\"/\"\"}\"" >/dev/null
fi

# ---------------------------------------------------------------------------------------------------------
# 3. Redis
command -v redis-cli >/dev/null || apt_install redis-tools

REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"
if [ "$(redis-cli -u "$REDIS_URL" ping 2>/dev/null)" != "PONG" ]; then
  private_redis="redis://127.0.0.1:$private_redis_port"
  say "Redis at $REDIS_URL does not answer; using a private instance ($private_redis)"
  if [ "$(redis-cli -p "$private_redis_port" ping 2>/dev/null)" != "PONG" ]; then
    command -v redis-server >/dev/null || apt_install redis-server
    redis-server --daemonize yes --bind 127.0.0.1 --port "$private_redis_port" --save "" --appendonly no \
      --dir "$data" --pidfile "$data/redis.pid" --logfile "$data/redis.log"
    for _ in $(seq 50); do
      [ "$(redis-cli -p "$private_redis_port" ping 2>/dev/null)" = "PONG" ] && break
      sleep 0.1
    done
    [ "$(redis-cli -p "$private_redis_port" ping 2>/dev/null)" = "PONG" ] || die "redis-server did not start (log: $data/redis.log)"
  fi
  REDIS_URL="$private_redis"
fi
export REDIS_URL

# ---------------------------------------------------------------------------------------------------------
# 4. Schema and catalog
RUST_LOG=error "$gateway_bin" migrate >/dev/null
RUST_LOG=error "$gateway_bin" upsert-model --id "$model_id" --context-length 4096 --input-price 0.10 --output-price 0.30 --supports-tools true \
  --worker-url "http://$worker_addr" >/dev/null
say "database migrated; model $model_id served by http://$worker_addr"

# ---------------------------------------------------------------------------------------------------------
# 5. Worker and gateway

# HTTP status of GET url ("000" when nothing answers).
http_status() { curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" 2>/dev/null || true; }

# The pid in .data/<name>.pid when that process is alive and runs <binary>.
running_pid() {
  local name="$1" bin pid exe
  bin="$(readlink -f "$2")"
  pid="$(cat "$data/$name.pid" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null || true)"
  case "$exe" in
    "$bin") echo "$pid" ;;
    "$bin (deleted)")
      # The binary was rebuilt since the process started.
      say "$name (pid $pid) runs an older build; restarting it" >&2
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$data/$name.pid"
      return 1 ;;
    *) return 1 ;;
  esac
}

# wait_healthy <name> <pid> <url> <seconds> <accept: 200 | any>
wait_healthy() {
  local name="$1" pid="$2" url="$3" seconds="$4" accept="$5" code deadline=$((SECONDS + $4))
  while :; do
    code="$(http_status "$url")"
    if [ "$accept" = any ] && [ "$code" != 000 ]; then return 0; fi
    [ "$code" = 200 ] && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$data/$name.log" >&2
      die "$name exited (log: $data/$name.log)"
    fi
    [ "$SECONDS" -lt "$deadline" ] || die "$name not healthy at $url after ${seconds}s (log: $data/$name.log)"
    sleep 0.5
  done
}

# start <name> <addr> <health accept> <binary> <args...>: leaves a running one alone, else starts it.
start() {
  local name="$1" addr="$2" accept="$3" bin="$4" pid
  shift 4
  if pid="$(running_pid "$name" "$bin")"; then
    say "$name already running (pid $pid) on http://$addr"
    wait_healthy "$name" "$pid" "http://$addr/health" 180 "$accept"
    return
  fi
  if [ "$(http_status "http://$addr/health")" != 000 ]; then
    die "something this script did not start answers on $addr: stop it, or set RUNAII_${name^^}_ADDR"
  fi
  say "starting $name on http://$addr (log: .data/$name.log)"
  # setsid: the process outlives this script and a Ctrl-C in its terminal.
  NO_COLOR=1 setsid nohup "$bin" "$@" >>"$data/$name.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$data/$name.pid"
  wait_healthy "$name" "$pid" "http://$addr/health" 180 "$accept"
  say "$name ready (pid $pid)"
}

# The worker secret gateway and worker share: made once, kept in .data. Workers refuse inference
# without its bearer token; gateways route only to announcements signed with it. To rotate, put a new
# secret on the first line and keep the old one below it until every process has re-read the file.
worker_secret_file="$data/worker-secret"
if [ ! -s "$worker_secret_file" ]; then
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$worker_secret_file.part" && echo >>"$worker_secret_file.part")
  mv "$worker_secret_file.part" "$worker_secret_file"
fi
RUNAII_WORKER_SECRET_FILE="$worker_secret_file"
export RUNAII_WORKER_SECRET_FILE
unset RUNAII_WORKER_SECRET
start worker "$worker_addr" 200 "$worker_bin" --model-path "$model_path" --model-id "$model_id" --listen "$worker_addr"
# The admin API's HS256 secret: made once, kept in .data (local use only; production sets its own).
secret_file="$data/admin-jwt-secret"
if [ ! -s "$secret_file" ]; then
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret_file")
fi
RUNAII_ADMIN_JWT_SECRET="$(cat "$secret_file")"
export RUNAII_ADMIN_JWT_SECRET
start gateway "$gateway_addr" any "$gateway_bin" serve --listen "$gateway_addr"

# ---------------------------------------------------------------------------------------------------------
# 6. Demo tenant key
key_file="$data/demo-api-key"
# 401 for an unknown key, 400 (an empty body) for a known one; nothing is generated or billed.
key_status() {
  curl -s -o /dev/null -m 5 -w '%{http_code}' -X POST -H 'content-type: application/json' -d '{}' \
    -H "Authorization: Bearer $(cat "$key_file")" "http://$gateway_addr/v1/chat/completions" || true
}
if [ -s "$key_file" ] && [ "$(key_status)" = 401 ]; then
  # A key from an earlier database (dropped, or another Postgres) is useless: replace it.
  say "the key in .data/demo-api-key is unknown to this database; creating a new one"
  rm -f "$key_file"
fi
if [ ! -s "$key_file" ]; then
  # The key is the last line on stdout (log lines would go there too; RUST_LOG=error keeps them out).
  key="$(RUST_LOG=error "$gateway_bin" create-key --tenant demo --name demo | tail -n 1)"
  [ -n "$key" ] || die "create-key printed no key"
  (umask 077 && printf '%s\n' "$key" >"$key_file.part")
  mv "$key_file.part" "$key_file"
  chmod 600 "$key_file"
  say "demo tenant key written to .data/demo-api-key"
fi
# A demo tenant without credit (new, or from before credits existed) gets 10 USD, once.
balance="$(curl -s -m 5 -H "Authorization: Bearer $(cat "$key_file")" "http://$gateway_addr/v1/account" \
  | sed -n 's/.*"balance":"\([^"]*\)".*/\1/p')"
if [ "$balance" = "0" ]; then
  RUST_LOG=error "$gateway_bin" grant-credits --tenant demo --amount 10 --note "quickstart demo credit" >/dev/null
  say "granted the demo tenant 10 USD of credit"
fi

# A JWT with every admin role, for the admin API on this machine (valid 30 days; remade on every run).
token_file="$data/demo-admin-token"
(umask 077 && RUST_LOG=error "$gateway_bin" issue-admin-token --subject demo-admin --ttl-hours 720 >"$token_file.part")
mv "$token_file.part" "$token_file"
say "admin token (ops, finance, admin) written to .data/demo-admin-token"

# The gateway probes its workers every second: wait (at most 10 s) until it reports the model ready.
for _ in $(seq 20); do
  curl -s -m 2 "http://$gateway_addr/v1/models" | grep -q '"is_ready":true' && break
  sleep 0.5
done

# ---------------------------------------------------------------------------------------------------------
# 7. How to use it
cat <<MSG

runaii is up: gateway http://$gateway_addr -> worker http://$worker_addr ($model_id)
  DATABASE_URL=$DATABASE_URL
  REDIS_URL=$REDIS_URL
  logs: .data/gateway.log, .data/worker.log
  admin API: curl -H "Authorization: Bearer \$(cat .data/demo-admin-token)" http://$gateway_addr/admin/v1/tenants
  console:   http://$gateway_addr/console  (sign in with the key in .data/demo-api-key, or as staff with .data/demo-admin-token)
  balance:   curl -H "Authorization: Bearer \$(cat .data/demo-api-key)" http://$gateway_addr/v1/account

Try it (from $root):

curl -s http://$gateway_addr/v1/chat/completions \\
  -H "Authorization: Bearer \$(cat .data/demo-api-key)" -H 'content-type: application/json' -d '{
  "model": "$model_id",
  "messages": [
    {"role": "system", "content": "Extract the invoice fields."},
    {"role": "user", "content": "Invoice #A-1024, due 2026-11-01, total 420.00 USD."}
  ],
  "temperature": 0,
  "response_format": {"type": "json_schema", "json_schema": {"name": "invoice", "strict": true, "schema": {
    "type": "object",
    "properties": {"invoice_number": {"type": "string"}, "due_date": {"type": "string"},
                   "total": {"type": "number"}, "currency": {"type": "string"}},
    "required": ["invoice_number", "due_date", "total", "currency"], "additionalProperties": false}}}
}'

The answer carries usage with its cost in USD (usage.cost).

The CLI is $cli_bin (cargo install --locked --path cli puts runaii on your PATH). From this checkout it
finds .data/demo-api-key by itself$( [ "$gateway_addr" = 127.0.0.1:8080 ] || echo "; add --base-url http://$gateway_addr"):

$cli_bin run $model_id "Invoice #A-1024, due 2026-11-01, total 420.00 USD." \\
  --system "Extract the invoice fields." -v \\
  --json-schema '{"type":"object","properties":{"invoice_number":{"type":"string"},"total":{"type":"number"}},"required":["invoice_number","total"]}'

Stop everything: scripts/stop.sh
MSG
