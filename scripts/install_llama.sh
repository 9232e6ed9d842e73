#!/usr/bin/env bash
# Installs llama-cpp-python built for a portable x86-64 target into the venv whose python is $1.
#
# The portable flags (and why) are in llama_flags.sh, shared with build_llama_bin.sh.
#
# pip's wheel cache is keyed on the package version, not on CMAKE_ARGS, so a natively built wheel would
# be reused. We build with --no-cache-dir into our own cache folder keyed on version + flags + platform,
# and install that wheel; a rebuilt venv reuses it (the compile takes ~8 min on 2 cores).
set -euo pipefail
PY=${1:?usage: install_llama.sh VENV_PYTHON}
. "$(dirname "$0")/llama_flags.sh"
VERSION=$LLAMA_VERSION

PYTAG=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
KEY=$(printf '%s|%s|%s|%s' "$VERSION" "$FLAGS" "$ARCH" "$PYTAG" | sha256sum | cut -c1-16)
CACHE="${SHP_RAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shp-ray}/llama-wheels/$KEY"
MARK="$(dirname "$(dirname "$PY")")/.llama-build-key"

if [ -f "$MARK" ] && [ "$(cat "$MARK")" = "$KEY" ]; then
  exit 0  # this venv already holds the portable build
fi

WHEEL=$(ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$WHEEL" ]; then
  echo "install_llama.sh: building llama-cpp-python $VERSION for a portable $ARCH target (~8 min on 2 cores)"
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/shp-llama-build.XXXXXX")
  trap 'rm -rf "$TMP"' EXIT
  CMAKE_ARGS="$FLAGS" FORCE_CMAKE=1 "$PY" -m pip wheel -q --no-cache-dir --no-deps \
    --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -w "$TMP"
  mkdir -p "$CACHE"
  # Move into place only when complete: an interrupted build leaves no wheel the next run would trust.
  mv "$TMP"/llama_cpp_python-"$VERSION"-*.whl "$CACHE"/
  printf '%s\n' "$FLAGS" > "$CACHE/FLAGS"
  WHEEL=$(ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl | head -n1)
fi
"$PY" -m pip install -q --no-deps --force-reinstall "$WHEEL"
printf '%s' "$KEY" > "$MARK"
