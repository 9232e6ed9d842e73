"""The fake provider shipped in the package (no HTTP): scripted replies, a callable, or the
simulated server's deterministic role replies computed in-process.

Token counts are real counts of the simulated tokenizer (:func:`shp_ray.providers.tokens.count_tokens`), so
token accounting downstream is exercised with realistic numbers.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from shp_ray.providers.base import ChatRequest, Completion, ProviderError, ProviderSpec, Usage
from shp_ray.providers.sim.replies import ReplyOptions, reply_text
from shp_ray.providers.tokens import count_tokens, prompt_tokens, truncate_tokens

Reply = str | ProviderError


class ScriptedProvider:
    """``ScriptedProvider(["a", "b"])`` replies in order; ``ScriptedProvider(fn)`` calls ``fn(request)``;
    ``ScriptedProvider()`` answers like ``shp-serve`` (Writer/Critic/judge role protocol).

    A scripted ``ProviderError`` is raised instead of replying (to test failure paths).
    """

    name = "scripted"

    def __init__(
        self,
        script: Iterable[Reply] | Callable[[ChatRequest], Reply] | None = None,
        *,
        model: str = "scripted",
        options: ReplyOptions | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.model = model
        self.delay_s = delay_s
        self._options = options or ReplyOptions()
        self._fn: Callable[[ChatRequest], Reply] | None = None
        self._replies: list[Reply] | None = None
        if callable(script):
            self._fn = script
        elif script is not None:
            self._replies = list(script)
        self._next = 0
        self._lock = threading.Lock()
        self.calls: list[ChatRequest] = []

    def _reply(self, request: ChatRequest) -> Reply:
        if self._fn is not None:
            return self._fn(request)
        if self._replies is not None:
            with self._lock:
                if self._next >= len(self._replies):
                    raise ProviderError(
                        f"ScriptedProvider: script exhausted after {len(self._replies)} replies", retryable=False
                    )
                reply = self._replies[self._next]
                self._next += 1
            return reply
        sample = request.seed if request.temperature > 0 and request.seed is not None else None
        return reply_text(self._options, list(request.messages), sample)

    async def complete(self, request: ChatRequest) -> Completion:
        t0 = time.monotonic()
        self.calls.append(request)
        if self.delay_s > 0:
            await asyncio.sleep(self.delay_s)
        reply = self._reply(request)
        if isinstance(reply, ProviderError):
            raise reply
        text, _ = truncate_tokens(str(reply), request.max_tokens)
        usage = Usage(prompt_tokens(list(request.messages)), count_tokens(text))
        return Completion(text, usage, latency_s=time.monotonic() - t0, attempts=1, model=request.model or self.model)


def from_spec(spec: ProviderSpec, script: Any = None, **kwargs: Any) -> ScriptedProvider:
    """The factory of kind ``scripted`` (named in ``shp_ray.providers.registry``)."""
    return ScriptedProvider(script, model=spec.model or "scripted", **kwargs)
