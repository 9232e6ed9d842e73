"""The embedded real LLM (the no-key default): llama.cpp's OpenAI-compatible server running a GGUF
model of the catalogue (:mod:`shp_ray.providers.local_models`: SmolLM2-135M-Instruct by default,
Qwen2.5-Coder 0.5B / 1.5B), chosen by its alias, on 127.0.0.1, started and stopped here.

The default model is TINY and often wrong: it proves the pipeline end to end on a real model, not the
science. ``--interrupt_requests False`` because the default lets a second request cut off a
running one. One thread by default: these machines share two cores.

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
import importlib.util
import json
import os
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

from shp_ray.providers import local_models
from shp_ray.providers.base import ProviderSpec

# A few questions' prefixes per role (an entry of the 1.5B model: ~0.4 GB of state + logits).
PROMPT_CACHE_BYTES = 3 << 30
MODEL_ALIAS = "smollm2-135m-instruct"  # the default embedded model (local_models.MODELS has the others)
# How a client calls the embedded server: no key, no known limit, two requests in flight (the
# server takes them in turn) and a long timeout (a reply on one shared CPU core is slow).
LLAMA_SPEC = ProviderSpec(kind="llama", model=MODEL_ALIAS, max_concurrency=2, timeout_s=300.0)
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings", "starlette_context")


@dataclass(frozen=True)
class LlamaOptions:
    """How the embedded server runs (shp-sweep's provider.n_threads, provider.n_ctx)."""

    n_threads: int = 1  # one: the CPU is shared with the embedder
    n_ctx: int = 4096  # tokens of prompt + reply
    # llama.cpp's prompt cache (RAM, LRU, PROMPT_CACHE_BYTES counted by what it holds: llama_main): a
    # request that starts like an earlier one resumes from that one's evaluated state. Every call of one
    # question and role shares the question + contexts (prompt shp-wc-v3 puts them first), so rounds >= 2
    # skip most of the prompt.
    prompt_cache: bool = True


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


def check_server_installed() -> None:
    missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise EmbeddedLLMError(
            f"the embedded LLM needs llama-cpp-python[server] (missing modules: {', '.join(missing)}); "
            "pip install 'llama-cpp-python[server]==0.3.36' (compiles from source, ~8 min on 2 cores)"
        )


def _lifeline() -> Callable[[], None] | None:
    """A pre-exec hook that makes the child die with SIGKILL when its parent dies (Linux only).

    libc and prctl are looked up here, in the parent: the hook itself only makes the C call.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    prctl, pr_set_pdeathsig, sigkill = libc.prctl, 1, int(signal.SIGKILL)

    def hook() -> None:
        prctl(pr_set_pdeathsig, sigkill, 0, 0, 0)

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
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.model = Path(model) if model is not None else None
        self.alias, self.n_threads, self.n_ctx, self.prompt_cache = alias, n_threads, n_ctx, prompt_cache
        self.host, self.port, self.startup_timeout_s = host, port, startup_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: int | None = None  # fd of the unlinked log file (the server writes to its own fd)
        self.returncode: int | None = None  # set once the server has exited

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def spec(self, **overrides: object) -> ProviderSpec:
        """A ProviderSpec for this server (:data:`LLAMA_SPEC` at its address)."""
        fields: dict[str, object] = {"base_url": self.base_url, "model": self.alias, **overrides}
        return replace(LLAMA_SPEC, **fields)  # type: ignore[arg-type]

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "shp_ray.providers.llama_main",
            "--model", str(self.model), "--model_alias", self.alias,
            "--host", self.host, "--port", str(self.port),
            "--n_threads", str(self.n_threads), "--n_ctx", str(self.n_ctx),
            "--interrupt_requests", "False",
            "--cache", str(self.prompt_cache), "--cache_size", str(PROMPT_CACHE_BYTES),
        ]  # fmt: skip

    def start(self) -> LlamaServer:
        check_server_installed()
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
        env = {**os.environ, "OMP_NUM_THREADS": str(self.n_threads)}
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
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as r:
                    if r.status == 200 and json.loads(r.read()).get("data") is not None:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
                pass
            time.sleep(0.2)
        raise EmbeddedLLMError(f"llama.cpp server not ready after {self.startup_timeout_s} s: {self.log_tail()}")

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
                "the llama.cpp library was compiled for another CPU (e.g. AMX or AVX-512 code on a CPU "
                "without it): rebuild it portably with `rm -f .venv/.llama-build-key && make demo` "
                "(scripts/install_llama.sh), then " + advice
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
