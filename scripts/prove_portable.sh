#!/usr/bin/env bash
# Proves that the installed llama.cpp build runs on an x86-64 CPU with AVX2 but neither AVX-512 nor AMX:
# one real chat completion through llama_cpp, executed by qemu's user-mode emulator as a Haswell CPU.
# A native build for a newer CPU dies there with SIGILL. Needs Debian's qemu-user (apt-get install
# qemu-user). Slow: emulation takes ~5 min for one short completion on 2 cores, so it is not in `make test`
# (which disassembles the same libraries instead, tests/test_llama.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
command -v qemu-x86_64 >/dev/null || { echo "prove_portable.sh: needs qemu-x86_64 (apt-get install qemu-user)" >&2; exit 2; }
MODEL=$("$PY" -c "from shp_ray.providers.llama import model_path; print(model_path())")
qemu-x86_64 -cpu Haswell "$PY" - "$MODEL" 2> >(grep -v "TCG doesn't support" >&2) <<'PYEOF'
import sys, time
from llama_cpp import Llama
t = time.time()
llm = Llama(model_path=sys.argv[1], n_threads=1, n_ctx=256, verbose=False)
out = llm.create_chat_completion(messages=[{"role": "user", "content": "Name one colour."}], max_tokens=6, temperature=0)
print(f"ok under an emulated Haswell CPU: {out['choices'][0]['message']['content']!r} {out['usage']} in {time.time() - t:.0f} s")
PYEOF
