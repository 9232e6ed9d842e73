"""Judge stored drafts with another judge, without generating anything again.

The generation id does not include the judge (a judge changes no draft), so a
sweep that switches ``judge=llm`` on a stored generation finds every
trajectory present. This step scores the drafts that judge has not scored yet
-- through the same judge cache, keyed by (judge, prompt version, metrics,
question, contexts, ground truth, draft), so no draft is ever judged twice --
and appends the rows to ``judgments``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.datasets import Scenario
from shp_ray.generation.lockstep import Lockstep, LockstepProvider, open_lockstep
from shp_ray.generation.services import DEFAULT_FACTORY, CachedChat, JudgeService, load_factory
from shp_ray.policy.scoring import METRICS
from shp_ray.providers.base import ProviderSpec
from storage.cache import JUDGMENTS_FILE, RESPONSES_FILE, JudgeCache, ResponseCache
from storage.parts import Store
from storage.schemas import JUDGMENTS


def unjudged(store: Store, gen_id: str, judge: str, scenario_ids: Sequence[str]) -> list[tuple[str, str, str]]:
    """(scenario_id, draft_hash, draft) of stored drafts that ``judge`` has not scored, one per draft."""
    rounds = store.read("rounds", columns=["gen_id", "scenario_id", "draft_hash", "draft"])
    rounds = rounds.filter(
        pc.and_(pc.equal(rounds["gen_id"], gen_id), pc.is_in(rounds["scenario_id"], pa.array(list(scenario_ids))))
    )
    judged = store.read("judgments", columns=["judge", "scenario_id", "draft_hash"])
    judged = judged.filter(pc.equal(judged["judge"], judge))
    done = set(zip(judged["scenario_id"].to_pylist(), judged["draft_hash"].to_pylist(), strict=True))
    todo: dict[tuple[str, str], str] = {}
    for sid, h, draft in zip(*(rounds[c].to_pylist() for c in ("scenario_id", "draft_hash", "draft")), strict=True):
        if (sid, h) not in done:
            todo.setdefault((sid, h), draft)
    return [(sid, h, draft) for (sid, h), draft in sorted(todo.items())]


async def _judge_all(
    service: JudgeService, items: list[tuple[Scenario, str, str]], limit: int, lockstep: Lockstep | None = None
) -> list[dict]:
    if lockstep is not None:  # judge.batch: every draft is a lane, all judged in one batch (a retry: the next)
        lockstep.expect(len(items))
        limit = max(1, len(items))
    gate = asyncio.Semaphore(limit)

    async def one(scn: Scenario, draft_hash: str, draft: str) -> dict:
        async with gate:
            try:
                key, j = await service.judge(scn, draft)
            finally:
                if lockstep is not None:
                    lockstep.leave()
        return {
            "judge_key": key,
            "judge": j.judge,
            "judge_prompt_version": j.prompt_version,
            "scenario_id": scn.scenario_id,
            "draft_hash": draft_hash,
            **{m: float(j.metrics.get(m, math.nan)) for m in METRICS},  # NaN = unparsed, never 0
            "judge_prompt_tokens": j.prompt_tokens,
            "judge_completion_tokens": j.completion_tokens,
            "error": j.error,
            "judge_mode": j.mode,
        }

    try:
        return list(await asyncio.gather(*(one(*item) for item in items)))
    finally:
        for closing in (getattr(service.chat, "provider", None), lockstep, getattr(lockstep, "live", None)):
            aclose = getattr(closing, "aclose", None)
            if aclose is not None:
                await aclose()


def judge_stored(
    store: Store,
    gen_id: str,
    scenarios: Sequence[Scenario],
    cfg: GenerationConfig,
    spec: ProviderSpec,
    cache: Path,
    *,
    judge: str,
    provider_factory: str = DEFAULT_FACTORY,
) -> int:
    """Score every stored draft of ``gen_id`` that ``judge`` lacks; returns how many rows were written."""
    by_id = {s.scenario_id: s for s in scenarios}
    todo = unjudged(store, gen_id, judge, list(by_id))
    if not todo:
        return 0
    chat, lockstep = None, None
    if cfg.judge == "llm":
        live = load_factory(provider_factory)(replace(spec, batch=False))
        provider = live
        if cfg.judge_batch:  # the unjudged drafts in a few batches, at the batch price
            lockstep = open_lockstep(spec, cache, role="judge", live=live, metadata={"shp_gen_id": gen_id[:16]})
            provider = LockstepProvider(lockstep.complete)
        chat = CachedChat(provider, ResponseCache(cache / RESPONSES_FILE))
    service = JudgeService(
        cfg.judge, JudgeCache(cache / JUDGMENTS_FILE), chat, cfg.judge_model or spec.model,
        cfg.judge_max_tokens, cfg.judge_parse_retries, cfg.seed,
    )  # fmt: skip
    items = [(by_id[sid], h, draft) for sid, h, draft in todo]
    rows = asyncio.run(_judge_all(service, items, spec.max_concurrency, lockstep))
    store.write("judgments", pa.Table.from_pylist(rows, schema=JUDGMENTS))
    return len(rows)
