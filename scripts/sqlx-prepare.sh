#!/usr/bin/env bash
# The data sqlx's query macros check SQL against when they build offline (every build: scripts/lib.sh sets
# SQLX_OFFLINE=true): .sqlx/query-<sha256 of the statement>.json, one file per statement, committed.
#
#   scripts/sqlx-prepare.sh           regenerates .sqlx/ (run it after changing a query or a migration,
#                                     and commit the result)
#   scripts/sqlx-prepare.sh --check   regenerates into a temporary directory and fails when that differs
#                                     from the committed .sqlx/ (CI runs this)
#
# How: a fresh database on $DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432; only the
# server is used, the database is a new one, dropped at the end) gets migrations/*.sql in order, each in
# one transaction as the gateway's migrator runs them; then `cargo check --workspace --all-targets` builds
# the macros online against it (SQLX_OFFLINE=false, DATABASE_URL, SQLX_OFFLINE_DIR: the macros describe
# every statement to Postgres and write what it said). Files that use the macros are touched first, so
# that cargo re-expands them even when nothing changed. A statement naming a column the migrations do not
# create fails here, at compile time, with Postgres' own message.
#
# .sqlx/ sits at the workspace root, where the macros of every member look after their own crate's
# directory: one directory for the whole workspace, as `cargo sqlx prepare --workspace` would write it
# (sqlx-cli is not needed). The descriptions are Postgres'; a server of another major version may describe
# a statement differently (its nullability), so regenerate on the version CI runs (15).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"

say() { echo "sqlx-prepare: $*"; }
die() { echo "sqlx-prepare: $*" >&2; exit 1; }

check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  *) die "unknown argument $1 (usage: scripts/sqlx-prepare.sh [--check])" ;;
esac

ensure_build_tools
if ! command -v psql >/dev/null || ! command -v pg_isready >/dev/null; then
  command -v apt-get >/dev/null || die "missing: psql and pg_isready (install the PostgreSQL client with your package manager)"
  say "installing postgresql-client (psql, pg_isready)"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql-client >/dev/null
fi

# The server: $DATABASE_URL without its database (and with its ?options, if any).
url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432}"
options=""
case "$url" in *\?*) options="?${url#*\?}"; url="${url%%\?*}" ;; esac
case "${url#*://}" in */*) server="${url%/*}" ;; *) server="$url" ;; esac
if ! pg_isready -q -d "$server/postgres$options" -t 3; then
  # scripts/run.sh starts a private Postgres here when the default one does not answer: use it too.
  private="postgres://postgres@127.0.0.1:55432"
  if [ -z "${DATABASE_URL:-}" ] && pg_isready -q -d "$private/postgres" -t 2; then
    say "Postgres at $server does not answer; using scripts/run.sh's private instance ($private)"
    server="$private"
    options=""
  else
    die "Postgres at $server does not answer. Start it, set DATABASE_URL to a server that does" \
      "(postgres://user@host:port, as a user that may create databases), or run scripts/run.sh once" \
      "(with DATABASE_URL unset it starts a private Postgres on 127.0.0.1:55432, which this script then uses)"
  fi
fi

# A database of its own per run, so two runs (two clones, a CI job) never share one.
db="runaii_sqlx_$$"
admin_url="$server/postgres$options"
db_url="$server/$db$options"
export PGOPTIONS='-c client_min_messages=warning' PGCONNECT_TIMEOUT=10
out="$(mktemp -d)"
cleanup() {
  psql -X -q -d "$admin_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$out"
}
trap cleanup EXIT
psql -X -q -v ON_ERROR_STOP=1 -d "$admin_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null \
  || die "could not create database $db on $server (above)"

# The migrations as sqlx applies them: by the version before the first `_`, each in a transaction unless
# its first line says `-- no-transaction`; down migrations are not applied.
shopt -s nullglob
mapfile -t migrations < <(cd migrations && for f in *.sql; do [[ $f == *.down.sql ]] || echo "$f"; done | sort -t_ -k1,1n)
[ "${#migrations[@]}" -gt 0 ] || die "no migrations/*.sql found"
for f in "${migrations[@]}"; do
  tx=(--single-transaction)
  [[ "$(head -n 1 "migrations/$f")" == "-- no-transaction"* ]] && tx=()
  psql -X -q -v ON_ERROR_STOP=1 "${tx[@]}" -d "$db_url" -f "migrations/$f" >/dev/null || die "migration $f failed (above)"
done
say "applied ${#migrations[@]} migrations to $db on $server"

# cargo does not see DATABASE_URL or SQLX_OFFLINE change, so it would reuse the offline expansions: touch
# every file that calls a query macro, which recompiles its crate and so every macro in it.
mapfile -t users < <(git ls-files --cached --others --exclude-standard -- '*.rs' \
  | xargs -r -d '\n' grep -lE 'sqlx::query(_as|_scalar)?(_unchecked)?!|sqlx::query_file' || true)
if [ "${#users[@]}" -gt 0 ]; then touch "${users[@]}"; fi
if ! SQLX_OFFLINE=false DATABASE_URL="$db_url" SQLX_OFFLINE_DIR="$out" cargo check --locked --workspace --all-targets; then
  die "cargo check failed against the migrated schema (above): a statement does not fit the tables" \
    "migrations/ creates, or the code does not build"
fi

committed="$root/.sqlx"
if "$check"; then
  changes="$(diff -rq "$committed" "$out" 2>&1 || true)"
  [ -d "$committed" ] || changes="no .sqlx/ directory is committed"
  if [ -n "$changes" ]; then
    echo "$changes" | sed "s#$out#(regenerated)#g; s#$root/##g" >&2
    die ".sqlx/ does not match the queries and migrations: run scripts/sqlx-prepare.sh and commit .sqlx/"
  fi
  say ".sqlx/ is up to date ($(find "$out" -name 'query-*.json' | wc -l) statements)"
else
  mkdir -p "$committed"
  rm -f "$committed"/query-*.json
  files=("$out"/query-*.json)
  if [ "${#files[@]}" -gt 0 ]; then cp "${files[@]}" "$committed"/; fi
  say "wrote ${#files[@]} statements to .sqlx/"
fi
