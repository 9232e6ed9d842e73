"""Test-only providers for the generation tests (importable by Ray workers: cwd is on their path).

``make_provider(spec)``: kind "scripted" replies in-process with the simulated
server's deterministic reply function; markers in the question inject bad input:
``[fail-writer]`` (every writer call fails for good), ``[empty-draft]`` (the
Writer returns ""), ``[bad-judge]`` (the judge never returns JSON). Other kinds
go to the real provider registry when it exists, else a minimal aiohttp client.
"""

from __future__ import annotations

import asyncio
import time

from shp_ray.providers.base import ChatRequest, Completion, ProviderError, ProviderSpec, Usage
from shp_ray.providers.sim_replies import ReplyOptions, count_tokens, prompt_tokens, reply_text


def _role(request: ChatRequest) -> str:
    system = " ".join(c for r, c in request.messages if r == "system")
    for role in ("Writer", "Critic", "judge"):
        if f"You are the {role}" in system:
            return role
    return "other"


class ScriptedProvider:
    name = "scripted"

    def __init__(self, spec: ProviderSpec) -> None:
        self.opts = ReplyOptions(seed=0)
        self.calls = 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        await asyncio.sleep(0)
        role, user = _role(request), "\n".join(c for r, c in request.messages if r == "user")
        if role == "Writer" and "[fail-writer]" in user:
            raise ProviderError("scripted permanent failure (HTTP 400)", status=400)
        if role == "Writer" and "[empty-draft]" in user:
            text = ""
        elif role == "Writer" and "[punct-draft]" in user:
            text = "?! ... !?"  # no word at all: a zero-norm embedding under fake-hash
        elif role == "judge" and "[bad-judge]" in user:
            text = "I think it is quite good, maybe 0.8?"
        else:
            text = reply_text(self.opts, [tuple(m) for m in request.messages])
        usage = Usage(prompt_tokens([tuple(m) for m in request.messages]), count_tokens(text))
        return Completion(text, usage, latency_s=0.001, model=request.model)


class MiniHttpProvider:
    """A minimal OpenAI-compatible client for the sim server (until the real registry lands)."""

    name = "mini-http"

    def __init__(self, spec: ProviderSpec) -> None:
        self.spec = spec
        self.stats = {"http_429": 0}
        self._session = None

    async def complete(self, request: ChatRequest) -> Completion:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession()
        body = {
            "model": request.model,
            "messages": request.openai_messages(),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
        }
        start = time.perf_counter()
        for attempt in range(1, self.spec.max_retries + 2):
            try:
                async with self._session.post(f"{self.spec.base_url}/chat/completions", json=body) as resp:
                    if resp.status == 429 or resp.status >= 500:
                        self.stats["http_429"] += resp.status == 429
                        await asyncio.sleep(float(resp.headers.get("Retry-After", "0.2") or 0.2))
                        continue
                    if resp.status >= 400:
                        raise ProviderError(f"HTTP {resp.status}", status=resp.status, attempts=attempt)
                    data = await resp.json(content_type=None)
            except (aiohttp.ClientError, ValueError):
                await asyncio.sleep(0.1)
                continue
            u = data.get("usage") or {}
            return Completion(
                data["choices"][0]["message"]["content"] or "",
                Usage(int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0))),
                latency_s=time.perf_counter() - start,
                attempts=attempt,
                model=request.model,
            )
        raise ProviderError("retries exhausted", attempts=self.spec.max_retries + 1, retryable=True)


def make_provider(spec: ProviderSpec):  # noqa: ANN201
    if spec.kind == "scripted":
        return ScriptedProvider(spec)
    try:
        from shp_ray.providers.registry import make_provider as real
    except ImportError:
        return MiniHttpProvider(spec)
    return real(spec)
