"""Test-only providers for the generation tests (importable by Ray workers: cwd is on their path).

``make_provider(spec)``: kind "scripted" replies in-process with the simulated
server's deterministic reply function; markers in the question inject bad input:
``[fail-writer]`` (every writer call fails for good), ``[empty-draft]`` (the
Writer returns ""), ``[bad-judge]`` (the judge never returns JSON). Other kinds
go to the real provider registry.
"""

from __future__ import annotations

import asyncio

from shp_ray.providers.base import ChatRequest, Completion, ProviderError, ProviderSpec, Usage
from shp_ray.providers.sim.replies import ReplyOptions, reply_text
from shp_ray.providers.tokens import count_tokens, prompt_tokens


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


def make_provider(spec: ProviderSpec):  # noqa: ANN201
    if spec.kind == "scripted":
        return ScriptedProvider(spec)
    from shp_ray.providers.registry import make_provider as real

    return real(spec)
