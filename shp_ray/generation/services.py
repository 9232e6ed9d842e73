"""The loop's services as plain objects: cached chat, the micro-batching embedder, the judge.

Ray actors (:mod:`shp_ray.generation.actors`) are thin shells around these; tests use them
in-process. Nothing here is Ray-specific.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
from collections.abc import Callable

import numpy as np

from shp_ray.generation.datasets import Scenario
from shp_ray.generation.embedder import Embedder
from shp_ray.generation.judge import JudgeResult, LexicalJudge, judge_key, llm_judge, llm_judge_name
from shp_ray.generation.prompts import JUDGE_PROMPT_VERSION
from shp_ray.providers.base import ChatRequest, Completion, Provider, ProviderSpec, Usage
from storage.cache import JudgeCache, ResponseCache

DEFAULT_FACTORY = "shp_ray.providers.registry:make_provider"


def load_factory(path: str) -> Callable[[ProviderSpec], Provider]:
    """``"module:function"`` -> the provider factory (imported where the provider is built)."""
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"provider factory must look like 'module:function', got {path!r}")
    return getattr(importlib.import_module(module), name)


class ChatStats:
    """Counters for the progress display: calls, cache hits, retries, 429s, paid tokens."""

    def __init__(self) -> None:
        self.calls = self.cached = self.retries = self.tokens = self.paid_tokens = 0
        self.paid = 0  # calls that reached the provider AND succeeded (a failed call is not a paid one)

    def snapshot(self) -> dict[str, int]:
        return dict(vars(self))


def completion_record(request: ChatRequest | None, completion: Completion) -> dict:
    """The response cache's record of one completion (its on-disk format: existing caches must still read).

    ``request`` None: a batch line whose request this run has not built (readable key parts unknown).
    """
    return {
        "content": completion.content,
        "prompt_tokens": completion.usage.prompt_tokens,
        "completion_tokens": completion.usage.completion_tokens,
        "latency_s": completion.latency_s,
        "model": completion.model,
        "key_parts": request.key_parts() if request is not None else {},  # for debugging a hit; not read back
        # the price it was paid at, kept by every later hit; a live call's record keeps the old format
        **({"mode": completion.mode} if completion.mode != "live" else {}),
        # each token's log-probability, when asked for and returned (a record without them keeps the old format)
        **({"logprobs": list(completion.logprobs)} if completion.logprobs is not None else {}),
    }


def completion_from_record(record: dict) -> Completion:
    """A cached completion: one attempt, marked ``cached`` (records older than ``model`` have none)."""
    return Completion(
        content=record["content"],
        usage=Usage(record["prompt_tokens"], record["completion_tokens"]),
        latency_s=record["latency_s"],
        attempts=1,
        model=record.get("model", ""),
        cached=True,
        mode=record.get("mode", "live"),  # records older than batch mode were all live calls
        logprobs=tuple(record["logprobs"]) if record.get("logprobs") is not None else None,
    )


async def cache_get(cache: object, key: str) -> dict | None:
    """A record from a cache: the SQLite file on this disk (read in a thread), or one with async
    ``aget`` (a worker on another node of a cluster reaches the driver's files through the cache actor)."""
    aget = getattr(cache, "aget", None)
    if aget is not None:
        return await aget(key)
    return await asyncio.to_thread(cache.get, key)  # type: ignore[attr-defined]


async def cache_put(cache: object, key: str, record: dict) -> None:
    """Store a record; returns once it is committed (a remote put is acknowledged by the cache actor)."""
    aput = getattr(cache, "aput", None)
    if aput is not None:
        await aput(key, record)
    else:
        await asyncio.to_thread(cache.put, key, record)  # type: ignore[attr-defined]


class CachedChat:
    """provider.complete behind the persistent response cache.

    A completion is stored the moment it arrives, so after a kill a rerun
    repeats no call that had completed; failures are never cached. ``cache``: a
    :class:`~storage.cache.ResponseCache` or anything with async ``aget``/``aput``.
    """

    def __init__(self, provider: Provider, cache: ResponseCache | object | None) -> None:
        self.provider = provider
        self.cache = cache
        self.stats = ChatStats()

    async def __call__(self, request: ChatRequest) -> Completion:
        self.stats.calls += 1
        if self.cache is not None:
            record = await cache_get(self.cache, request.cache_key())
            if record is not None:
                hit = completion_from_record(record)
                self.stats.cached += 1
                self.stats.tokens += hit.usage.total_tokens
                return hit
        completion = await self.provider.complete(request)
        self.stats.paid += 1
        self.stats.retries += max(0, completion.attempts - 1)
        self.stats.tokens += completion.usage.total_tokens
        self.stats.paid_tokens += completion.usage.total_tokens
        if self.cache is not None:
            await cache_put(self.cache, request.cache_key(), completion_record(request, completion))
        return completion

    def http_429(self) -> int:
        """429s the provider saw, when it counts them (the rate-limited client does)."""
        for attr in ("stats", "counters"):
            stats = getattr(self.provider, attr, None)
            if isinstance(stats, dict) and "http_429" in stats:
                return int(stats["http_429"])
            value = getattr(stats, "http_429", None)
            if isinstance(value, int):
                return value
        return 0


class EmbedBatcher:
    """Collects texts from many concurrent trajectories into micro-batches for one Embedder.

    While a batch encodes (in a thread, so the event loop keeps accepting),
    new requests queue up and form the next batch: batches grow with load
    without a fixed wait.
    """

    def __init__(self, embedder: Embedder, max_batch: int = 64) -> None:
        self.embedder = embedder
        self.max_batch = max_batch
        self._queue: asyncio.Queue[tuple[str, asyncio.Future[np.ndarray]]] | None = None
        self._task: asyncio.Task[None] | None = None
        self.batches = 0

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._queue = asyncio.Queue()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def embed(self, text: str) -> np.ndarray:
        self._start()
        fut: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        await self._queue.put((text, fut))  # type: ignore[union-attr]
        return await fut

    async def embed_many(self, texts: list[str]) -> list[np.ndarray]:
        return list(await asyncio.gather(*(self.embed(t) for t in texts)))

    async def _run(self) -> None:
        queue = self._queue
        assert queue is not None
        while True:
            batch = [await queue.get()]
            await asyncio.sleep(0)  # let requests made in the same tick join
            while len(batch) < self.max_batch and not queue.empty():
                batch.append(queue.get_nowait())
            texts = [t for t, _ in batch]
            try:
                vecs = await asyncio.to_thread(self.embedder.encode, texts)
            except Exception as exc:  # noqa: BLE001 - each waiter gets the error, the batcher lives on
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            self.batches += 1
            for (_, fut), vec in zip(batch, vecs, strict=True):
                if not fut.done():
                    fut.set_result(vec)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class EmbedService:
    """A node's embedding model behind its batcher: what the node's embedding actor holds, or the node's one
    trajectory worker itself (then no actor process is started for it). The model loads on the first
    :meth:`info` (torch with ``threads`` threads), which embeds a text: a model that cannot embed says so there."""

    def __init__(self, model: str, batch_size: int, threads: int) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a model is read from its folder, never fetched
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        self.threads = threads
        self.embedder = Embedder(model, batch_size=batch_size)
        self.batcher = EmbedBatcher(self.embedder, max_batch=batch_size)
        self._ready = False

    def _warm(self) -> None:
        if not self._ready:
            if self.embedder.model_spec != "fake-hash":
                import torch

                torch.set_num_threads(self.threads)
            self.embedder.encode(["warm-up"])
            self.embedder.encoded -= 1  # the warm-up text is not the run's
            self._ready = True

    def info(self) -> dict[str, object]:
        self._warm()
        e = self.embedder
        return {"name": e.name, "dim": e.dim, "encoded": e.encoded, "hits": e.hits, "batches": self.batcher.batches}

    async def embed(self, text: str) -> np.ndarray:
        return await self.batcher.embed(text)

    async def embed_many(self, texts: list[str]) -> list[np.ndarray]:
        return await self.batcher.embed_many(texts)


class JudgeService:
    """The judge behind the shared judge cache (keyed by judge, prompt version, metrics, q, C, gt, draft)."""

    def __init__(
        self,
        kind: str,
        cache: JudgeCache | object | None,
        chat: Callable[[ChatRequest], object] | None = None,
        model: str = "",
        max_tokens: int = 128,
        parse_retries: int = 2,
        seed: int = 0,
    ) -> None:
        if kind == "llm" and (chat is None or not model):
            raise ValueError("the LLM judge needs a chat function and a model name")
        self.kind = kind
        self.cache = cache
        self.chat = chat
        self.model = model
        self.max_tokens = max_tokens
        self.parse_retries = parse_retries
        self.seed = seed
        self.lexical = LexicalJudge()
        self.name = LexicalJudge.name if kind == "lexical" else llm_judge_name(model)
        self.prompt_version = LexicalJudge.prompt_version if kind == "lexical" else JUDGE_PROMPT_VERSION
        self.computed = 0

    def key(self, scn: Scenario, draft: str) -> str:
        return judge_key(self.name, self.prompt_version, scn.question, scn.contexts, scn.ground_truth, draft)

    async def judge(self, scn: Scenario, draft: str) -> tuple[str, JudgeResult]:
        key = self.key(scn, draft)
        if self.cache is not None:
            record = await cache_get(self.cache, key)
            if record is not None:
                return key, JudgeResult.from_record(record, cached=True)
        if self.kind == "lexical":
            result = self.lexical.score(scn.question, scn.contexts, scn.ground_truth, draft)
        else:
            result = await llm_judge(
                self.chat,  # type: ignore[arg-type]
                self.model,
                scn,
                draft,
                max_tokens=self.max_tokens,
                seed=self.seed,
                parse_retries=self.parse_retries,
            )
        self.computed += 1
        # A result with an error (a reply that never parsed, a scenario without contexts) is not kept:
        # the next run tries again, cheaply, through the response cache.
        if self.cache is not None and not result.error:
            await cache_put(self.cache, key, result.to_record())
        return key, result


class LocalServices:
    """In-process Services for tests and small runs: same semantics as the Ray actors."""

    def __init__(self, chat: CachedChat, embed: EmbedBatcher, judge: JudgeService | None) -> None:
        self._chat, self._embed, self._judge = chat, embed, judge

    async def chat(self, request: ChatRequest) -> Completion:
        return await self._chat(request)

    async def embed(self, text: str) -> np.ndarray:
        return await self._embed.embed(text)

    async def judge(self, scenario: Scenario, draft: str) -> tuple[str, JudgeResult] | None:
        return None if self._judge is None else await self._judge.judge(scenario, draft)
