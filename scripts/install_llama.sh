#!/usr/bin/env bash
# Installs llama-cpp-python built for a portable x86-64 target into the venv whose python is $1.
#
# Why: a default source build compiles for the build machine's native instruction set. On a VM whose
# CPU advertises AMX but cannot run it, that library dies with SIGILL on the first prompt; on an older
# CPU, AVX-512 code does the same. We build with native detection off and an explicit baseline that
# every x86-64 server of the last decade runs (SSE4.2, AVX, AVX2, BMI2, FMA, F16C), nothing wider.
#
# pip's wheel cache is keyed on the package version, not on CMAKE_ARGS, so a natively built wheel would
# be reused. We build with --no-cache-dir into our own cache folder keyed on version + flags + platform,
# and install that wheel; a rebuilt venv reuses it (the compile takes ~8 min on 2 cores).
set -euo pipefail
PY=${1:?usage: install_llama.sh VENV_PYTHON}
VERSION=0.3.36

ARCH=$(uname -m)
case "$ARCH" in
  x86_64)
    FLAGS="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF \
-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_CCACHE=OFF" ;;
  aarch64)
    # armv8.2-a with dotprod/fp16 is what current arm64 servers share; never -mcpu=native.
    FLAGS="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod+fp16 -DGGML_CCACHE=OFF" ;;
  *)
    echo "install_llama.sh: no portable flag set for architecture '$ARCH'; add one here" >&2; exit 2 ;;
esac

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
