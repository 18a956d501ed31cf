#!/usr/bin/env bash
# Runs every test: installs build tools if missing, fetches the embedded model, builds, tests; then the
# official-SDK tests (tests/sdk, Python, in a virtualenv at ~/.cache/runaii/venv) against a private
# gateway + worker stack; then the console's browser tests (tests/console: Debian's Chromium, installed
# with apt when missing, driven by Playwright from a virtualenv at ~/.cache/runaii/venv-console). The tests
# of files kept in an object store start Ceph's radosgw themselves (scripts/s3-server.sh, apt when missing).
# Arguments go to `cargo test`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"
ensure_build_tools
scripts/check-deploy.sh
scripts/fetch-model.sh
cargo test --workspace --locked "$@"

# The SDK tests start the binaries from $CARGO_TARGET_DIR/debug. A no-op after cargo test: the same
# packages and targets, so the same features (`-p <crate>` would unify features differently and rebuild
# llama.cpp, 10 minutes here).
cargo build --locked --workspace --all-targets

venv="${RUNAII_VENV:-$HOME/.cache/runaii/venv}"
ensure_venv "$venv" --quiet -r tests/sdk/requirements.txt
"$venv/bin/python" -m pytest -q tests/sdk

# The Anthropic SDK's 0.x line (x-api-key) against the same Messages tests, in its own virtualenv.
venv0="${RUNAII_VENV_ANTHROPIC0:-$HOME/.cache/runaii/venv-anthropic0}"
ensure_venv "$venv0" --quiet -r tests/sdk/requirements-anthropic-0x.txt
"$venv0/bin/python" -m pytest -q tests/sdk/test_anthropic.py

# The web console in a real headless browser: Debian's Chromium (Playwright never downloads one here),
# driven by Playwright for Python, against another private stack. Screenshots of every main page go to
# ~/.cache/runaii/console-screenshots/<time> (the run prints the folder).
if [ ! -x "${RUNAII_CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "installing chromium (for the console's browser tests)"
  apt_install chromium
fi
venv_console="${RUNAII_VENV_CONSOLE:-$HOME/.cache/runaii/venv-console}"
ensure_venv "$venv_console" --quiet -r tests/console/requirements.txt
"$venv_console/bin/python" -m pytest -q tests/console
