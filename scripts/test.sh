#!/usr/bin/env bash
# Runs every test: installs build tools if missing, fetches the embedded model, builds, tests.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"
ensure_build_tools
scripts/fetch-model.sh
cargo test --workspace --locked "$@"
