#!/usr/bin/env bash
# Stops what scripts/run.sh started: the processes whose pids are in .data/*.pid (gateway first, then the
# worker, then a private Redis or Postgres if run.sh had to start one). Safe to run again.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
data="$root/.data"

stop_one() {
  local file="$1" name pid signal=TERM
  name="$(basename "$file" .pid)"
  pid="$(head -n 1 "$file" 2>/dev/null | tr -dc '0-9')"
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    rm -f "$file"
    return
  fi
  # Postgres: SIGINT is its "fast" shutdown (SIGTERM waits for every client to leave).
  [ "$name" = postgres ] && signal=INT
  echo "stop: $name (pid $pid)"
  kill "-$signal" "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$file"; return; }
    sleep 0.1
  done
  echo "stop: $name (pid $pid) did not stop in 10 s; killing it" >&2
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$file"
}

shopt -s nullglob
for name in gateway worker; do
  [ -f "$data/$name.pid" ] && stop_one "$data/$name.pid"
done
for file in "$data"/*.pid; do
  stop_one "$file"
done
echo "stop: done"
