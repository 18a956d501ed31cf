# Shared by the project scripts: paths, and installing what the build needs where it is missing.

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Builds live outside the clone, so every clone (and CI) reuses them.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/runaii/target}"
# The gateway's SQL is checked at compile time by sqlx's macros, against the committed .sqlx/ data. With a
# DATABASE_URL in the environment (run.sh and the bench scripts export one; a developer's shell may have
# one) and SQLX_OFFLINE unset, the macros would instead ask that database, whatever it is (another schema
# version, a database not migrated yet, nothing listening): builds stay offline unless a caller says
# otherwise, as scripts/sqlx-prepare.sh does to regenerate .sqlx/.
export SQLX_OFFLINE="${SQLX_OFFLINE:-true}"

# llama.cpp builds through llama-cpp-sys-2 with cmake and clang (bindgen needs libclang).
ensure_build_tools() {
  local missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v clang >/dev/null || missing+=(clang)
  ldconfig -p 2>/dev/null | grep -q 'libclang' || missing+=(libclang-dev)
  command -v cargo >/dev/null || { echo "cargo is missing: install Rust (rustup) first" >&2; exit 1; }
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing build tools: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq cmake clang libclang-dev >/dev/null
  fi
}

# wait_http <url> <pid> <seconds>: until GET url answers 200; exits the script when the process <pid> is
# gone first or the time runs out (the caller's $out, when set, is where its logs are).
wait_http() {
  local deadline=$((SECONDS + $3))
  until [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" || true)" = 200 ]; do
    kill -0 "$2" 2>/dev/null || { echo "process $2 exited before $1 answered (logs in ${out:-its log})" >&2; exit 1; }
    [ "$SECONDS" -lt "$deadline" ] || { echo "$1 did not answer 200 within $3 s" >&2; exit 1; }
    sleep 0.5
  done
}
