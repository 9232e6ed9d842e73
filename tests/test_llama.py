"""One real round trip through the embedded llama.cpp server (SmolLM2-135M, a TINY model)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from shp_ray.providers.base import ChatRequest
from shp_ray.providers.llama import LlamaServer, model_path
from shp_ray.providers.registry import make_provider

pytestmark = pytest.mark.integration


def test_two_calls_through_the_embedded_llm():
    assert model_path().stat().st_size > 50_000_000
    server = LlamaServer(n_threads=1)
    with server:
        assert server.running

        async def two_calls():
            async with make_provider(server.spec()) as provider:  # type: ignore[attr-defined]
                first = await provider.complete(
                    ChatRequest(server.alias, (("user", "Name one colour."),), max_tokens=8, seed=1)
                )
                second = await provider.complete(
                    ChatRequest(server.alias, (("user", "Name one animal."),), max_tokens=8, seed=1)
                )
                return first, second

        first, second = asyncio.run(two_calls())
    assert not server.running
    for c in (first, second):
        assert c.content.strip()
        assert 0 < c.usage.completion_tokens <= 8 and c.usage.prompt_tokens > 3
        assert c.attempts == 1 and c.latency_s > 0


def test_a_missing_model_file_is_a_clear_error(tmp_path):
    from shp_ray.providers.llama import EmbeddedLLMError

    with pytest.raises(EmbeddedLLMError, match="does not exist"):
        LlamaServer(model=tmp_path / "nope.gguf").start()


# AMX tile instructions (what killed the server with SIGILL on a CPU that advertises AMX but cannot
# run it) and AVX-512 registers: neither may appear in a portable build (baseline AVX2/FMA/F16C).
AMX = ("tilezero", "ldtilecfg", "sttilecfg", "tileloadd", "tileloaddt1", "tilestored", "tilerelease",
       "tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud", "tdpbf16ps", "tdpfp16ps")  # fmt: skip


BINARIES = ("llama-server", "llama-bench", "llama-batched-bench")  # scripts/build_llama_bin.sh's targets


def _llama_code():
    """llama.cpp's binaries in the venv and any ggml / llama library they load (none when linked statically,
    as scripts/build_llama_bin.sh builds them: the matrix kernels are then inside each binary)."""
    import re
    import subprocess

    from shp_ray.providers.llama import server_binary

    code = [server_binary(name) for name in BINARIES]
    for binary in list(code):
        linked = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
        code += [Path(p) for p in re.findall(r"=>\s*(\S*lib(?:ggml|llama|mtmd)\S*\.so\S*)", linked)]
    return list(dict.fromkeys(p.resolve() for p in code))


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="the x86-64 ISA check")
def test_the_built_binaries_are_portable_x86_64():
    """Disassemble llama-server, llama-bench, llama-batched-bench (and any llama.cpp library they load): no AMX,
    no AVX-512, and AVX2 really in use."""
    import re
    import subprocess

    zmm, ymm = re.compile(r"%zmm\d|%k[1-7]\b"), re.compile(r"%ymm\d")
    kernels = 0
    for lib in _llama_code():
        out = subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True, check=True
        ).stdout
        words = set(re.findall(r"\t([a-z0-9]+)\s", out))
        assert not words & set(AMX), f"{lib.name} holds AMX instructions {sorted(words & set(AMX))}"
        wide = zmm.search(out)
        assert wide is None, f"{lib.name} uses AVX-512 registers: {out[max(0, wide.start() - 80) : wide.end()]!r}"
        if "<ggml_vec_dot_q4_0_q8_0>:" in out:  # ggml's CPU kernels are here (in a static binary, or the library)
            kernels += 1
            assert ymm.search(out), f"{lib.name} has no AVX2 (ymm) code: not the portable build"
    assert kernels, "no ggml CPU kernels in the binaries or their libraries: nothing checked"


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGILL"])
def test_a_killed_server_is_noticed_with_its_exit_status_and_log(sig):
    import os
    import signal

    from shp_ray.providers.llama import EmbeddedLLMError

    server = LlamaServer(n_threads=1).start()
    try:
        server.check()  # alive: no error
        limits = Path(f"/proc/{server._proc.pid}/limits").read_text()
        assert re.search(r"Max core file size\s+0\s+0", limits)  # a crash leaves no core file of the model
        os.kill(server._proc.pid, getattr(signal, sig))
        server._proc.wait(10)
        assert not server.running
        with pytest.raises(EmbeddedLLMError, match=rf"embedded llama\.cpp server .* died: killed by {sig}") as err:
            server.check()
        assert "rerun the same command" in str(err.value)
        # An illegal instruction: the cached build is removed, not only the venv's mark (which rebuilds nothing).
        assert ("shp-ray}/llama-bin .venv/.llama-bin-key && make demo" in str(err.value)) == (sig == "SIGILL")
        assert "llama" in server.log_tail().lower()
    finally:
        server.stop()


def test_the_server_dies_with_its_parent_and_leaves_no_log(tmp_path):
    """kill -9 of the process that started the server takes the server with it (PR_SET_PDEATHSIG)."""
    import os
    import subprocess
    import sys
    import time

    import psutil

    script = (
        "import sys, time\n"
        "from shp_ray.providers.llama import LlamaServer\n"
        "s = LlamaServer(n_threads=1).start()\n"
        "print(s._proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        server_pid = int(parent.stdout.readline())
        assert psutil.pid_exists(server_pid)
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and psutil.pid_exists(server_pid):
            if psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE:
                break
            time.sleep(0.1)
        gone = not psutil.pid_exists(server_pid) or psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE
        assert gone, f"the llama.cpp server {server_pid} outlived its killed parent"
        assert list(tmp_path.iterdir()) == []  # its log was never a file anyone has to delete
    finally:
        parent.kill()


def test_temperature_0_and_a_seeded_sample_give_the_same_draft_alone_or_batched(embedded_llm):
    """llama-server decodes its slots in one batch: a reply must not depend on what else is decoded.

    Each request is answered alone, then again while other requests occupy the other slot (the
    server batches them), then alone once more; at temperature 0 and with a seeded sample at 0.8.
    """
    server = embedded_llm()
    assert server.parallel >= 2

    def ask(text: str, temperature: float, slot: str) -> ChatRequest:
        msgs = (("user", text),)
        return ChatRequest(server.alias, msgs, max_tokens=24, temperature=temperature, seed=7, affinity=slot)

    async def run() -> list[tuple[str, ...]]:
        async with make_provider(server.spec()) as provider:  # type: ignore[attr-defined]
            asks = [ask("Write one sentence about rivers.", t, "a") for t in (0.0, 0.8)]
            others = [ask(f"Count from {n} to {n + 9}.", 0.0, "") for n in (1, 2, 3)]  # any free slot
            alone = [(await provider.complete(r)).content for r in asks]
            batched = []
            for r in asks:  # the other slot busy with a longer reply while this one decodes
                done = await asyncio.gather(provider.complete(r), *(provider.complete(o) for o in others))
                batched.append(done[0].content)
            again = [(await provider.complete(r)).content for r in asks]
            return [tuple(alone), tuple(batched), tuple(again)]

    alone, batched, again = asyncio.run(run())
    assert all(alone) and alone == again
    assert batched == alone


def test_the_reference_is_llama_cpps_own_benchmark_on_the_embedded_model():
    """shp-bench generate --reference: llama-batched-bench at each batch size and llama-bench for one sequence."""
    from bench.generate import reference

    ref = reference("smollm2-135m-instruct", threads=1, prompt=8, gen=4, batches=(1, 2))
    assert set(ref["batched"]) == {"1", "2"}
    for speeds in [*ref["batched"].values(), ref["single"]]:
        assert speeds["pp_tokens_per_s"] > 0 and speeds["tg_tokens_per_s"] > 0


def test_a_trajectorys_next_round_resumes_from_its_prefix_in_its_slot(embedded_llm):
    """The id_slot the client derives from a request's affinity: round 2 evaluates only what round 1 lacked."""
    import json
    import urllib.request

    server = embedded_llm()
    system = "You are the Writer. Question: " + "What is a river? " * 30

    def round_(t: int) -> dict:
        request = ChatRequest(server.alias, (("system", system), ("user", f"Round {t}")), max_tokens=4, affinity="q/w")
        body = {**request.openai_body(), "id_slot": request.slot()}
        post = urllib.request.Request(
            server.base_url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(post, timeout=120) as r:
            return json.loads(r.read())["usage"]

    first, second = round_(1), round_(2)
    assert first["prompt_tokens"] == second["prompt_tokens"] > 100
    assert second["prompt_tokens_details"]["cached_tokens"] >= first["prompt_tokens"] - 10


def test_the_sweep_is_set_beside_the_engine_for_its_prompts_and_its_replies():
    """ratio compares generated tokens/s alone; work_ratio charges the engine the sweep's prompts too."""
    from bench.generate import against_engine

    run = {"parallel": 2, "prompt_tokens": 4000, "gen_tokens": 2000, "gen_tokens_per_s": 10.0, "generation_s": 200.0}
    ref = {
        "batched": {
            "1": {"pp_tokens_per_s": 1.0, "tg_tokens_per_s": 1.0},
            "2": {"pp_tokens_per_s": 50.0, "tg_tokens_per_s": 20.0},
        }
    }
    # The engine: 4000 / 50 = 80 s of prompts + 2000 / 20 = 100 s of replies = 180 s, against the sweep's 200 s.
    assert against_engine(run, ref) == {"reference_gen_tokens_per_s": 20.0, "ratio": 0.5, "work_ratio": 0.9}
    assert against_engine({**run, "parallel": 4}, ref) == {
        "reference_gen_tokens_per_s": None,
        "ratio": None,
        "work_ratio": None,
    }
