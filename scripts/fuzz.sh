#!/usr/bin/env bash
# Runs the `cargo fuzz` targets in fuzz/ (schema, messages, responses, chat), each for FUZZ_SECONDS, one
# after the other, and prints each run's figures. Installs cargo-fuzz if it is missing. What each target
# asserts: docs/fuzzing.md. Not part of scripts/test.sh (the instrumented build alone takes minutes);
# `cargo test` replays the committed corpus instead (gateway/tests/fuzz_corpus.rs).
#
#   FUZZ_SECONDS    seconds per target (default 60)
#   FUZZ_TARGETS    targets to run, space-separated (default: all)
#   FUZZ_SANITIZER  none (default) or address; see below
#   FUZZ_RSS_MB     memory limit of one run, MB (default 2048): a schema that needs more is a finding
#   FUZZ_TIMEOUT    seconds one input may take (default 10): an input that takes longer is a finding
# Arguments go to libFuzzer, e.g. `-jobs=2` or `-seed=1`.
#
# cargo fuzz needs nightly compiler flags; on a stable toolchain RUSTC_BOOTSTRAP=1 unlocks them. The
# build goes to ~/.cache/runaii/fuzz-target (FUZZ_TARGET_DIR), outside the clone and apart from the main
# build so neither waits on the other's lock. The corpus a run grows goes to ~/.cache/runaii/fuzz-corpus
# (FUZZ_CORPUS_DIR); fuzz/corpus/<target> (committed seeds) is read, never written. Crashes and timeouts
# land in fuzz/artifacts/<target>/; `cargo fuzz run --target-dir … <target> <file>` replays one.
#
# Sanitizer: none by default. The code under test is safe Rust (the workspace denies `unsafe_code`), so
# AddressSanitizer would look only at dependencies' unsafe code, more slowly, and its larger stack frames
# can trip the harness's 2 MiB worker-stack check where the real gateway would not overflow.
# Panics, overflows (debug assertions are on), hangs and memory blow-ups are what the targets look for.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"

seconds="${FUZZ_SECONDS:-60}"
targets="${FUZZ_TARGETS:-schema messages responses chat}"
sanitizer="${FUZZ_SANITIZER:-none}"
target_dir="${FUZZ_TARGET_DIR:-$HOME/.cache/runaii/fuzz-target}"
corpus_root="${FUZZ_CORPUS_DIR:-$HOME/.cache/runaii/fuzz-corpus}"
export RUSTC_BOOTSTRAP=1

command -v cargo >/dev/null || { echo "fuzz: cargo is missing: install Rust (rustup) first" >&2; exit 1; }
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi
# libFuzzer (in libfuzzer-sys) is C++, built by the cc crate with `c++` unless CXX names another.
if ! command -v c++ >/dev/null; then
  command -v clang++ >/dev/null || ensure_build_tools
  export CXX="${CXX:-clang++}"
fi

# Many codegen units: a faster build of the gateway's many dependencies, for slightly slower runs.
build=(--sanitizer "$sanitizer" --target-dir "$target_dir" --codegen-units 16)
cd fuzz
echo "fuzz: building ${targets} (sanitizer ${sanitizer}) in ${target_dir}"
for target in $targets; do
  cargo fuzz build "${build[@]}" "$target"
done

failed=()
for target in $targets; do
  corpus="$corpus_root/$target"
  mkdir -p "$corpus" "artifacts/$target"
  log="$(mktemp -t "fuzz-$target.XXXXXX.log")"
  echo "fuzz: $target for ${seconds}s (log $log)"
  status=0
  cargo fuzz run "${build[@]}" "$target" "$corpus" "corpus/$target" -- \
    -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb="${FUZZ_RSS_MB:-2048}" \
    -dict=dict/json.dict -print_final_stats=1 "$@" >"$log" 2>&1 || status=$?
  # The last status line (`#N DONE cov: … ft: … corp: …`) and libFuzzer's final counters.
  grep -E '^#[0-9]+' "$log" | tail -n 1 || true
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" || true
  echo "fuzz: $target corpus now $(find "$corpus" -type f | wc -l) files"
  if [ "$status" -ne 0 ]; then
    failed+=("$target")
    grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written to' "$log" | head -n 8 >&2 || true
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in fuzz/artifacts/<target>/; add each, once fixed, to fuzz/corpus/<target>/)" >&2
  exit 1
fi
echo "fuzz: no crash, hang or memory blow-up in ${targets}"
