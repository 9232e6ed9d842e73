#!/usr/bin/env bash
# Proves that the built llama-server runs on an x86-64 CPU with AVX2 but neither AVX-512 nor AMX: the
# server, executed by qemu's user-mode emulator as a Haswell CPU, loads the default embedded model
# (SmolLM2-135M) and answers one real chat completion. A native build for a newer CPU dies there with
# SIGILL, which LlamaServer reports with the server's log. Only the server is emulated; this script's
# Python (the watch, the HTTP client) runs natively. Needs Debian's qemu-user (apt-get install qemu-user).
# Slow (emulated matrix kernels), so it is not in `make test`, which disassembles the same binaries instead
# (tests/test_llama.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ "$(uname -m)" = x86_64 ] || { echo "prove_portable.sh: the x86-64 proof; this machine is $(uname -m)" >&2; exit 2; }
QEMU=$(command -v qemu-x86_64 || true)
[ -n "$QEMU" ] || { echo "prove_portable.sh: needs qemu-x86_64 (apt-get install qemu-user)" >&2; exit 2; }
"$PY" - "$QEMU" <<'PYEOF'
import asyncio, sys, time
from shp_ray.providers.base import ChatRequest
from shp_ray.providers.llama import LlamaServer
from shp_ray.providers.registry import make_provider

# One slot, one thread, a short context, no prompt cache: the least the emulator has to run.
server = LlamaServer(n_threads=1, n_ctx=256, parallel=1, prompt_cache=False, startup_timeout_s=1800)
native = server.command
server.command = lambda: [sys.argv[1], "-cpu", "Haswell", *native()]


async def one_call():
    async with make_provider(server.spec(timeout_s=1800.0, max_retries=0)) as provider:
        return await provider.complete(
            ChatRequest(server.alias, (("user", "Name one colour."),), max_tokens=6, temperature=0.0)
        )


t = time.monotonic()
try:
    with server:
        started = time.monotonic() - t
        try:
            reply = asyncio.run(one_call())
        except Exception:
            server.check()  # a server that died (SIGILL: not portable) is the cause, with its log
            raise
except Exception as exc:
    sys.exit(f"prove_portable.sh: FAILED under an emulated Haswell CPU: {type(exc).__name__}: {exc}")
if not reply.content.strip() or reply.usage.completion_tokens < 1:
    sys.exit(f"prove_portable.sh: FAILED: an empty reply under an emulated Haswell CPU ({reply.usage})")
print(
    f"ok: llama-server under qemu-x86_64 -cpu Haswell answered {reply.content!r} "
    f"({reply.usage.prompt_tokens} prompt + {reply.usage.completion_tokens} generated tokens; "
    f"up in {started:.0f} s, {time.monotonic() - t:.0f} s in all)"
)
PYEOF
