# Sourced by build_llama_bin.sh (llama-server, llama-bench, llama-batched-bench): the source pin and the
# portable CMake flags, both part of the binaries' cache key. Sets LLAMA_VERSION, ARCH and FLAGS.
# LLAMA_VERSION pins the source: the llama-cpp-python sdist of that version, downloaded only for the
# llama.cpp it vendors (no Python binding is built or installed).
#
# Why: a default source build compiles for the build machine's native instruction set. On a VM whose
# CPU advertises AMX but cannot run it, that code dies with SIGILL on the first prompt; on an older
# CPU, AVX-512 code does the same. Native detection is off and the baseline is explicit: what every
# x86-64 server of the last decade runs (SSE4.2, AVX, AVX2, BMI2, FMA, F16C), nothing wider.
LLAMA_VERSION=0.3.36
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
    echo "llama_flags.sh: no portable flag set for architecture '$ARCH'; add one here" >&2; exit 2 ;;
esac
