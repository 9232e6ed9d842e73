#!/usr/bin/env bash
# Builds llama.cpp's own `llama-server` (continuous batching over --parallel slots, per-slot prefix
# cache), `llama-bench` (the engine's throughput for one sequence) and `llama-batched-bench` (for N
# sequences decoded together: the reference at the batch sizes the server runs) into the venv's bin/.
#
# Portable flags (llama_flags.sh, never the build machine's native ISA); the source is the llama.cpp that
# the pinned llama-cpp-python sdist vendors, fetched with pip from the registry (only the sdist: the Python
# binding is not built). No web UI (no npm, no download), no OpenSSL (it only serves 127.0.0.1), static
# libraries (the binaries need nothing from the build tree). Cached in a folder keyed on version + flags +
# arch (~6 min to build on 2 cores, once); a rebuilt venv copies the cached binaries.
set -euo pipefail
PY=${1:?usage: build_llama_bin.sh VENV_PYTHON}
. "$(dirname "$0")/llama_flags.sh"
BIN_FLAGS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF"
TARGETS="llama-server llama-bench llama-batched-bench"

KEY=$(printf '%s|%s|%s|%s' "$LLAMA_VERSION" "$FLAGS" "$ARCH" "$BIN_FLAGS" | sha256sum | cut -c1-16)
CACHE="${SHP_RAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shp-ray}/llama-bin/$KEY"
BIN="$(dirname "$PY")"
MARK="$(dirname "$BIN")/.llama-bin-key"

all_in() { for t in $TARGETS; do [ -x "$1/$t" ] || return 1; done; }

if [ -f "$MARK" ] && [ "$(cat "$MARK")" = "$KEY" ] && all_in "$BIN"; then
  exit 0  # this venv already holds these binaries
fi

if ! all_in "$CACHE"; then
  echo "build_llama_bin.sh: building $TARGETS (llama.cpp of llama-cpp-python $LLAMA_VERSION) for a portable $ARCH target (~6 min on 2 cores)"
  CMAKE=$(command -v cmake || true)
  if [ -z "$CMAKE" ]; then  # no system CMake: the registry's, into the venv
    "$PY" -m pip install -q cmake ninja
    CMAKE="$BIN/cmake"
  fi
  GEN=()
  if command -v ninja >/dev/null || [ -x "$BIN/ninja" ]; then GEN=(-G Ninja); fi
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/shp-llama-bin.XXXXXX")
  trap 'rm -rf "$TMP"' EXIT
  "$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$LLAMA_VERSION" -d "$TMP"
  tar -xzf "$TMP"/llama_cpp_python-"$LLAMA_VERSION".tar.gz -C "$TMP"
  SRC="$TMP/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp"
  # shellcheck disable=SC2086  # the flag strings are lists of words
  PATH="$BIN:$PATH" "$CMAKE" -S "$SRC" -B "$TMP/build" "${GEN[@]}" $FLAGS $BIN_FLAGS >"$TMP/configure.log" 2>&1 \
    || { tail -n 30 "$TMP/configure.log" >&2; echo "build_llama_bin.sh: CMake configure failed" >&2; exit 1; }
  # shellcheck disable=SC2086
  PATH="$BIN:$PATH" "$CMAKE" --build "$TMP/build" --target $TARGETS -j "$(nproc)" >"$TMP/build.log" 2>&1 \
    || { tail -n 30 "$TMP/build.log" >&2; echo "build_llama_bin.sh: the build failed" >&2; exit 1; }
  mkdir -p "$CACHE"
  # Into place only when all are complete: an interrupted build leaves nothing the next run would trust.
  for t in $TARGETS; do cp "$TMP/build/bin/$t" "$CACHE/.$t.part"; done
  for t in $TARGETS; do mv "$CACHE/.$t.part" "$CACHE/$t"; done
  printf '%s\n%s\n' "$FLAGS" "$BIN_FLAGS" > "$CACHE/FLAGS"
fi
for t in $TARGETS; do cp "$CACHE/$t" "$BIN/.$t.part" && mv "$BIN/.$t.part" "$BIN/$t"; done
printf '%s' "$KEY" > "$MARK"
