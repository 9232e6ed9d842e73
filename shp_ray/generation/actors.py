"""Ray actors: thin async shells around :mod:`shp_ray.generation.services` (logic lives there).

- :class:`EmbedActor`: one per node that has several workers; micro-batches texts from every
  trajectory of its node through the embedding model, torch on ``generation.embed_num_cpus``
  threads (capped by the node's CPUs). A node's only worker holds the model itself (one process
  less to start: what a small run mostly costs).
- :class:`JudgeActor`: one per node for the LLM judge, behind the shared judge cache (the lexical judge, a
  computation, runs in each worker, through the same cache).
- :class:`TrajectoryWorker`: many trajectories in flight per actor
  (``max_concurrency``); builds its provider from a ProviderSpec inside the
  actor (no client and no key ever crosses a process boundary).

A worker answers each trajectory with its rows; the driver writes them (one writer of Parquet parts per
run, in the driver's own process: no actor to start, and the rows travel once either way).

An actor on the driver's node opens the SQLite caches itself; one on another node is handed
the cache actor (``cache_actor``, :mod:`shp_ray.generation.cache_actor`) and goes through it.

No actor blocks on ``ray.get``: async actors await object refs. The per-draft methods
do not report task events (Ray would otherwise keep a record of every call in the GCS).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import ray

from shp_ray.generation.answer_config import build as build_extractor
from shp_ray.generation.cache_actor import judge_cache, response_cache
from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.datasets import Scenario
from shp_ray.generation.embedder import embedder_name
from shp_ray.generation.guard import failure_outcome
from shp_ray.generation.judge import JudgeResult
from shp_ray.generation.lockstep import LockstepProvider, open_lockstep
from shp_ray.generation.loop import generate_trajectory
from shp_ray.generation.records import trajectory_rows
from shp_ray.generation.score_config import build as build_scorer
from shp_ray.generation.services import CachedChat, EmbedService, JudgeService, load_factory
from shp_ray.providers.base import ChatRequest, Completion, ProviderSpec
from shp_ray.providers.shared_limiter import limit_in_process

if TYPE_CHECKING:
    from shp_ray.generation.node_services import NodeServices


@ray.remote(num_cpus=0)
class EmbedActor:
    """A node's embedding model, for the node's several trajectory workers."""

    def __init__(self, model: str, batch_size: int, threads: int) -> None:
        self.service = EmbedService(model, batch_size, threads)

    async def info(self) -> dict[str, object]:
        return self.service.info()

    @ray.method(enable_task_events=False)  # high volume: keep GCS memory flat
    async def embed(self, text: str) -> np.ndarray:
        return await self.service.embed(text)

    async def embed_many(self, texts: list[str]) -> list[np.ndarray]:
        return await self.service.embed_many(texts)


def _chat_for(spec: ProviderSpec, factory: str, cache_dir: str, cache_actor: object | None) -> CachedChat:
    provider = load_factory(factory)(replace(spec, batch=False))  # live calls (batch mode: the judge's)
    return CachedChat(provider, response_cache(cache_dir, cache_actor))


def _judge_service(
    cfg: GenerationConfig, spec: ProviderSpec, cache_dir: str, cache_actor: object | None, chat: CachedChat | None
) -> JudgeService:
    return JudgeService(
        cfg.judge,
        judge_cache(cache_dir, cache_actor),
        chat=chat,
        model=cfg.judge_model or spec.model,
        max_tokens=cfg.judge_max_tokens,
        parse_retries=cfg.judge_parse_retries,
        seed=cfg.seed,
    )


@ray.remote(num_cpus=0)
class JudgeActor:
    """The LLM judge of a node: its calls share one chat (one response cache, one view of the rate limit)."""

    def __init__(
        self, cfg: GenerationConfig, spec: ProviderSpec, factory: str, cache_dir: str, cache_actor: object = None
    ) -> None:
        self.chat = _chat_for(spec, factory, cache_dir, cache_actor)
        self.service = _judge_service(cfg, spec, cache_dir, cache_actor, self.chat)

    async def name(self) -> str:
        return self.service.name

    @ray.method(enable_task_events=False)  # high volume: keep GCS memory flat
    async def judge(self, scenario: Scenario, draft: str) -> tuple[str, JudgeResult]:
        return await self.service.judge(scenario, draft)

    async def stats(self) -> dict[str, int]:
        out = {"judged": self.service.computed, "judge_http_429": self.chat.http_429()}
        return out | {f"judge_{k}": v for k, v in self.chat.stats.snapshot().items()}


class _RayServices:
    """``embed``: the node's embedding actor, or the worker's own model (the node's one worker); ``judge``: the
    node's judge actor (the LLM judge), the worker's own service (the lexical judge: a computation, no call, so
    no actor process), or None (no judge in the loop)."""

    def __init__(
        self,
        chat: CachedChat,
        embed: ray.actor.ActorHandle | EmbedService,
        judge: ray.actor.ActorHandle | JudgeService | None,
    ) -> None:
        self._chat, self._embed, self._judge = chat, embed, judge

    async def chat(self, request: ChatRequest) -> Completion:
        return await self._chat(request)

    async def embed(self, text: str) -> np.ndarray:
        if isinstance(self._embed, EmbedService):
            return await self._embed.embed(text)
        return await self._embed.embed.remote(text)

    async def judge(self, scenario: Scenario, draft: str) -> tuple[str, JudgeResult] | None:
        if isinstance(self._judge, JudgeService):
            return await self._judge.judge(scenario, draft)
        return None if self._judge is None else await self._judge.judge.remote(scenario, draft)


@ray.remote(num_cpus=0)
class LockstepActor:
    """Batch mode: the job's one :class:`~shp_ray.generation.lockstep.Lockstep`, which every worker's
    calls wait in (an async actor: thousands of waiting calls cost nothing)."""

    def __init__(self, spec: ProviderSpec, factory: str, cache_dir: str, gen_id: str) -> None:
        self.live = load_factory(factory)(replace(spec, batch=False))
        self.lockstep = open_lockstep(
            spec, Path(cache_dir), role="generation", live=self.live, metadata={"shp_gen_id": gen_id[:16]}
        )
        self._left: set[str] = set()

    async def expect(self, lanes: int) -> None:
        self.lockstep.expect(lanes)

    async def leave(self, lane: str | None = None) -> None:
        """A lane is left once: a trajectory resubmitted after its worker died may leave again."""
        if lane is not None:
            if lane in self._left:
                return
            self._left.add(lane)
        self.lockstep.leave()

    @ray.method(enable_task_events=False)  # high volume: keep GCS memory flat
    async def complete(self, request: ChatRequest) -> Completion:
        return await self.lockstep.complete(request)

    async def stats(self) -> dict[str, object]:
        return self.lockstep.stats.snapshot()

    async def close(self) -> None:
        await self.lockstep.aclose()
        aclose = getattr(self.live, "aclose", None)
        if aclose is not None:
            await aclose()


@dataclass(frozen=True)
class WorkerSetup:
    """What every trajectory worker of a run is built with: the config, the endpoint's spec and the provider
    factory, the caches' folder, the generation and the embedding size; ``only_caller``: the worker is the only
    process that calls the endpoint (its limiter lives in the worker, not in an actor of its own)."""

    cfg: GenerationConfig
    spec: ProviderSpec
    factory: str
    cache_dir: str
    gen_id: str
    dim: int
    only_caller: bool = False


@ray.remote(num_cpus=0)
class TrajectoryWorker:
    def __init__(
        self,
        setup: WorkerSetup,
        node: NodeServices,
        lockstep: ray.actor.ActorHandle | None = None,
    ) -> None:
        """``node``: the embedding, judge and cache actors of the node the worker runs on; ``lockstep``: the job's
        lockstep in batch mode (None: live calls)."""
        spec, cache_dir = setup.spec, setup.cache_dir
        self.cfg, self.spec, self.gen_id, self.dim = setup.cfg, spec, setup.gen_id, setup.dim
        self.lockstep = lockstep
        self.node = ray.get_runtime_context().get_node_id()
        if setup.only_caller:
            limit_in_process()
        if lockstep is None:
            self.chat = _chat_for(spec, setup.factory, cache_dir, node.cache)
        else:  # batch mode: every call waits in the job's lockstep (the same cache keys as live)
            provider = LockstepProvider(lambda request: lockstep.complete.remote(request))
            self.chat = CachedChat(provider, response_cache(cache_dir, node.cache))
        judge = _judge_service(self.cfg, spec, cache_dir, node.cache, None) if self.cfg.judges_in_worker else node.judge
        self.embedding = None
        if node.embed is None:  # the node's one worker: the model loads here, on the driver's first embed_info
            self.embedding = EmbedService(self.cfg.embedder, self.cfg.embed_batch_size, node.embed_threads)
        self.services = _RayServices(self.chat, self.embedding or node.embed, judge)

    async def warm(self) -> bool:
        """Ready the provider before the clock starts (the shared limiter actor, if it has one)."""
        snapshot = getattr(self.chat.provider, "limiter_snapshot", None)
        if snapshot is not None:
            await snapshot()
        return True

    async def embed_info(self) -> dict[str, object]:
        """The worker's own embedding model (the node has no embedding actor): loaded, one text embedded."""
        assert self.embedding is not None
        return self.embedding.info()

    @ray.method(enable_task_events=False)  # high volume: keep GCS memory flat
    async def run(self, scenario: Scenario) -> dict[str, object]:
        """Generate one trajectory; the answer carries its store rows (``rows``) for the driver to write."""
        try:
            result = await generate_trajectory(scenario, self.cfg, self.spec.model, self.services)
        finally:
            if self.lockstep is not None:
                await self.lockstep.leave.remote(scenario.scenario_id)
        scorers = [build_scorer(s) for s in self.cfg.scores]  # import-cached: cheap per trajectory
        extractor = build_extractor(self.cfg.answer)  # import-cached, like the scorers
        name = embedder_name(self.cfg.embedder)
        approval, last_k = self.cfg.prompts.approval, self.cfg.logprobs.last_k
        rows = trajectory_rows(result, self.gen_id, self.dim, name, approval, scorers, extractor, last_k)
        w = sum(r.writer.usage.total_tokens for r in result.rounds if r.writer)
        c = sum(r.critic.usage.total_tokens for r in result.rounds if r.critic)
        j = sum(r.judgment.tokens for r in result.rounds if r.judgment)
        return {
            "scenario_id": scenario.scenario_id,
            "failed": result.failed,
            "failure": failure_outcome(result.fatal),
            "tokens": w + c + j,
            "node": self.node,
            "rows": rows,
        }

    @ray.method(enable_task_events=False)  # high volume: keep GCS memory flat
    async def stats(self) -> dict[str, int]:
        encoded = 0 if self.embedding is None else self.embedding.embedder.encoded
        return {**self.chat.stats.snapshot(), "http_429": self.chat.http_429(), "encoded": encoded}
