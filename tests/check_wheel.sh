#!/usr/bin/env bash
# The plain install, as a user meets it: build the wheel from the tracked files, install it with
# no extras into a clean virtual environment (CPU torch first), and run `lmk-rag --version`, the
# README's quick start and `ingest` + `search` of the sample corpus from outside the repository.
# Fails on a wheel over 15 MB, on research files in the wheel, or if peft came with the install.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
max_bytes=$((15 * 1024 * 1024))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PIP_DISABLE_PIP_VERSION_CHECK=1

step() { echo "check_wheel: $*"; }

step "building the wheel from the tracked files"
mkdir -p "$work/src"
(cd "$root" && git ls-files -co --exclude-standard -z | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) \
  | tar -xf - -C "$work/src"
"$python" -m pip wheel -q --no-deps "$work/src" -w "$work/dist" 2>&1 | grep -v "WARNING: Location" || true
wheel=$(ls "$work"/dist/lmk_rag-*.whl)
size=$(stat -c %s "$wheel")
step "$(basename "$wheel"): $((size / 1024)) KiB"
if [ "$size" -gt "$max_bytes" ]; then
  echo "check_wheel: the wheel is $size bytes, over the 15 MB limit" >&2
  exit 1
fi
if "$python" -m zipfile -l "$wheel" | grep -E "(^|/)(research|docs|benchmarks|tests)/"; then
  echo "check_wheel: the wheel holds research, docs, benchmark or test files (listed above)" >&2
  exit 1
fi

step "installing it without extras into a clean venv"
"$python" -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip install -q)
# CPU torch first, so no multi-GB CUDA build is pulled in (as the README's install section says).
"${pip[@]}" "torch==2.13.0" 2>&1 | grep -v "WARNING: Location" || true
"$work/venv/bin/python" -c "import torch" 2>/dev/null \
  || "${pip[@]}" "torch>=2.4" --index-url https://download.pytorch.org/whl/cpu
"${pip[@]}" "$wheel" 2>&1 | grep -v "WARNING: Location" || true
if "$work/venv/bin/python" -c "import peft" 2>/dev/null; then
  echo "check_wheel: peft was installed by the plain install; it belongs to the [train] extra" >&2
  exit 1
fi

step "running the README quick start and the CLI from outside the repository"
mkdir -p "$work/user" && cp -r "$root/examples" "$work/user/examples"
"$python" "$root/tests/readme_snippets.py" "Quick start" >"$work/user/quickstart.py"
cd "$work/user"
bin="$work/venv/bin"
"$bin/lmk-rag" --version | grep -E "^lmk-rag [0-9]"
"$bin/python" quickstart.py
"$bin/lmk-rag" ingest examples/sample_corpus --index qdrant:./lmk_index --no-progress
out=$("$bin/lmk-rag" search "How long do solar inverters last?" --index qdrant:./lmk_index -k 3)
echo "$out"
echo "$out" | head -n 1 | grep -q "home_solar.md" || { echo "check_wheel: search did not rank home_solar.md first" >&2; exit 1; }
# The demo corpus ships in the wheel: its HTML page and PDF are read, and the PDF's hit names its page.
"$bin/lmk-rag" ingest --sample --index qdrant:./sample_index --no-progress | grep -q "added 3" \
  || { echo "check_wheel: lmk-rag ingest --sample did not add the 3 demo documents" >&2; exit 1; }
out=$("$bin/lmk-rag" search "when do spring tides come?" --index qdrant:./sample_index -k 1 --neighbours 0)
echo "$out"
echo "$out" | head -n 1 | grep -q "tide_tables.pdf .* p\{1,2\}\. " || { echo "check_wheel: the demo PDF's hit names no page" >&2; exit 1; }
step "passed"
