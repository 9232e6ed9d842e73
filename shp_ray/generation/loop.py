"""The Writer -> Critic round loop (docs/design.md, "A round"), in two modes.

Round t: Writer(q, C, x_{t-1}, f_{t-1}) -> x_t (f_0 = ""); e_t = phi(x_t);
IS_t from the judge; decide(...); if the loop continues, Critic(q, C, x_t) -> f_t.

- :func:`generate_trajectory` (GENERATE mode) never decides: it runs every
  scenario to max_rounds and keeps everything, so one stored trajectory serves
  every policy. f_t is the critique of round t's draft; at the last round the
  critic is not called (no policy ever reads that critique), so feedback = "".
- :func:`live_trajectory` (LIVE mode) is what a user deploys: it stops when a
  policy says so, feeding a :class:`~shp_ray.policy.cascade.HaltTracker`, and judges
  only when the policy consults IS. On the same responses it stops where the
  reference replay over the stored trajectory stops (a test proves it).

Both talk to the outside world only through a :class:`Services` object, so the
same code runs in-process (tests) and inside Ray actors. The Critic is chosen by ``critic`` (:func:`critique`):
the LLM, a code draft's visible-test report itself (no call: critic tokens 0), the LLM with that report, or none
(the resampling control: every round a fresh sample of the first prompt, critic tokens 0).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from shp_ray.generation.code_tests import critique as code_critique
from shp_ray.generation.code_tests import report_text, visible_report
from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.datasets import Scenario
from shp_ray.generation.judge import JudgeResult, draft_hash
from shp_ray.generation.prompts import critic_messages, writer_messages
from shp_ray.policy.cascade import HaltTracker
from shp_ray.policy.scoring import METRICS, cosine_distance, information_score
from shp_ray.policy.table import Policy, random_stop_round
from shp_ray.policy.weights import uniform
from shp_ray.providers.base import ChatRequest, Completion
from storage.resume import FATAL_STAGES
from storage.write_fault import write_failure


class Services(Protocol):
    """What the loop needs from the world: cached chat calls, phi, and the judge."""

    async def chat(self, request: ChatRequest) -> Completion: ...

    async def embed(self, text: str) -> np.ndarray: ...

    async def judge(self, scenario: Scenario, draft: str) -> tuple[str, JudgeResult] | None: ...


@dataclass
class RoundRecord:
    round: int
    draft: str
    feedback: str = ""
    writer: Completion | None = None
    critic: Completion | None = None
    embedding: np.ndarray | None = None
    judge_key: str = ""
    judgment: JudgeResult | None = None

    @property
    def draft_hash(self) -> str:
        return draft_hash(self.draft)


@dataclass
class Failure:
    scenario_id: str
    round: int
    stage: str  # writer | critic | judge | embed
    error_type: str
    message: str
    status: int | None = None  # the HTTP status, when the provider got one
    retryable: bool | None = None  # the provider's word on whether another attempt could succeed


@dataclass
class TrajectoryResult:
    scenario: Scenario
    rounds: list[RoundRecord] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    failed: bool = False  # a writer/critic call failed for good: no rounds are stored
    elapsed_s: float = 0.0

    @property
    def fatal(self) -> Failure | None:
        """The writer/critic failure that ended this trajectory (None if it was not failed)."""
        return next((f for f in reversed(self.failures) if f.stage in FATAL_STAGES), None) if self.failed else None


def _failure(scn: Scenario, t: int, stage: str, exc: BaseException) -> Failure:
    """The scenario's failure row; a cache that cannot be written is the run's fault, not the scenario's:
    raised, so the run stops before it pays for a reply it cannot keep."""
    if (fault := write_failure(exc)) is not None:
        raise fault from None
    # str(exc) of our providers never carries a key or headers (ProviderError's contract).
    return Failure(
        scn.scenario_id, t, stage, type(exc).__name__, str(exc)[:2000],
        getattr(exc, "status", None), getattr(exc, "retryable", None),
    )  # fmt: skip


def writer_request(scn: Scenario, cfg: GenerationConfig, model: str, t: int, prev: str, feedback: str) -> ChatRequest:
    """Round t's Writer call: with ``critic=none`` the first prompt again (no draft, no feedback), its own seed
    (:meth:`GenerationConfig.writer_seed`) making it a fresh sample; its rounds go to one server slot (affinity)."""
    shown = 1 if cfg.critic == "none" else t
    msgs = writer_messages(scn.question, scn.contexts, shown, prev, feedback, cfg.prompts, scn.meta)
    seed = cfg.writer_seed(scn.task, scn.epoch, t)
    return ChatRequest(
        model=model, messages=msgs, max_tokens=cfg.max_tokens, temperature=cfg.temperature, seed=seed,
        logprobs=cfg.logprobs.request, affinity=f"{scn.scenario_id}/writer",
    )  # fmt: skip


def critic_request(
    scn: Scenario, cfg: GenerationConfig, model: str, t: int, draft: str, test_report: str = ""
) -> ChatRequest:
    msgs = critic_messages(scn.question, scn.contexts, t, draft, cfg.prompts, scn.meta, test_report)
    return ChatRequest(
        model=model, messages=msgs, max_tokens=cfg.max_tokens, temperature=cfg.critic_temperature, seed=cfg.seed,
        affinity=f"{scn.scenario_id}/critic",
    )  # fmt: skip


async def critique(
    scn: Scenario, cfg: GenerationConfig, model: str, t: int, draft: str, services: Services
) -> tuple[Completion | None, str]:
    """f_t: (the Critic's call, its text). ``critic=tests`` makes no call: the visible-test report is the
    critique, approving (the preset's marker) iff every visible test passed; ``llm_tests`` hands the LLM Critic
    that report. The sandbox runs off the event loop, so the other trajectories go on meanwhile."""
    report = ""
    if cfg.critic == "none":  # the resampling control: no review, the next round draws the first prompt again
        return None, ""
    if cfg.critic != "llm":
        tested = await asyncio.to_thread(visible_report, scn.question, scn.meta, draft)
        if cfg.critic == "tests":
            return None, code_critique(tested, cfg.prompts.approval)
        report = report_text(tested)
    reply = await services.chat(critic_request(scn, cfg, model, t, draft, report))
    return reply, reply.content or ""


async def _embed(services: Services, scn: Scenario, t: int, draft: str, failures: list[Failure]) -> np.ndarray | None:
    """e_t; a failed embed is recorded and gives None (stored as the zero vector: distance 1.0)."""
    try:
        return await services.embed(draft)
    except Exception as exc:  # noqa: BLE001 - recorded, never fatal
        failures.append(_failure(scn, t, "embed", exc))
        return None


async def _judge(
    services: Services, scn: Scenario, t: int, draft: str, failures: list[Failure]
) -> tuple[str, JudgeResult] | None:
    """(judge key, IS metrics); a failed judge call is recorded as NaN metrics, never 0."""
    try:
        return await services.judge(scn, draft)
    except Exception as exc:  # noqa: BLE001
        failures.append(_failure(scn, t, "judge", exc))
        return None


async def generate_trajectory(scn: Scenario, cfg: GenerationConfig, model: str, services: Services) -> TrajectoryResult:
    """GENERATE mode: all cfg.max_rounds rounds, with embeddings and judgments.

    Nothing in generate mode decides, so round t+1's Writer needs only f_t: the
    embedding and the judgment of x_t run in the background while the loop
    goes on, and the trajectory is bound by the provider, not by phi's batches.
    """
    start = time.perf_counter()
    out = TrajectoryResult(scn)
    side: list[tuple[RoundRecord, asyncio.Task, asyncio.Task]] = []
    prev, feedback = "", ""
    try:
        for t in range(1, cfg.max_rounds + 1):
            try:
                writer = await services.chat(writer_request(scn, cfg, model, t, prev, feedback))
            except Exception as exc:  # noqa: BLE001 - a failed scenario is a row, the run goes on
                out.failures.append(_failure(scn, t, "writer", exc))
                out.failed = True
                break
            draft = writer.content or ""
            rec = RoundRecord(t, draft, writer=writer)
            side.append(
                (
                    rec,
                    asyncio.ensure_future(_embed(services, scn, t, draft, out.failures)),
                    asyncio.ensure_future(_judge(services, scn, t, draft, out.failures)),
                )
            )
            if t < cfg.max_rounds:  # the last critique is never read: no critic at the last round
                try:
                    rec.critic, rec.feedback = await critique(scn, cfg, model, t, draft, services)
                except Exception as exc:  # noqa: BLE001
                    out.failures.append(_failure(scn, t, "critic", exc))
                    out.failed = True
                    break
            out.rounds.append(rec)
            prev, feedback = draft, rec.feedback
    finally:
        for rec, emb, judged in side:
            rec.embedding = await emb
            got = await judged
            if got is not None:
                rec.judge_key, rec.judgment = got
    out.elapsed_s = time.perf_counter() - start
    if out.failed:
        out.rounds = []  # whole trajectories only: replay never sees a truncated one
    return out


@dataclass
class LiveResult:
    scenario_id: str
    stop_round: int
    reason: str
    answer: str
    operational_tokens: int
    rounds: list[RoundRecord]
    distances: list[float]
    scores: list[float]


def is_of(judged: tuple[str, JudgeResult] | None, weights: Mapping[str, float]) -> float:
    if judged is None:
        return math.nan
    return information_score(judged[1].metrics, weights)


async def live_trajectory(
    scn: Scenario,
    policy: Policy,
    cfg: GenerationConfig,
    model: str,
    services: Services,
    weights: Mapping[str, float] | None = None,
) -> LiveResult:
    """LIVE mode: stop when ``policy`` says so (cascade via HaltTracker, or random's fixed tau).

    Raises ProviderError from a writer/critic call (a live user sees it); a
    failed embed or judge degrades to "no evidence" (distance 1.0 / NaN IS).
    """
    if policy.kind == "oracle":
        raise ValueError("oracle_is needs the whole judged trajectory: it can only be replayed, not run live")
    weights = weights or uniform()
    cap = policy.halt.max_rounds
    tracker = HaltTracker(policy.halt)
    fixed_tau = random_stop_round(policy.seed, scn.scenario_id, cap) if policy.kind == "random" else None
    failures: list[Failure] = []
    rounds: list[RoundRecord] = []
    prev, feedback, prev_emb = "", "", None
    operational = 0
    for t in range(1, cap + 1):
        writer = await services.chat(writer_request(scn, cfg, model, t, prev, feedback))
        draft = writer.content or ""
        operational += writer.usage.total_tokens
        jobs = [_embed(services, scn, t, draft, failures)]
        if policy.consults_is:
            jobs.append(_judge(services, scn, t, draft, failures))
        got = await asyncio.gather(*jobs)
        emb = got[0] if got[0] is not None else np.zeros(0, dtype=np.float32)
        judged = got[1] if policy.consults_is else None
        if judged is not None:
            operational += judged[1].tokens
        distance = None
        if t >= 2:
            distance = cosine_distance(emb, prev_emb) if emb.shape == prev_emb.shape else 1.0
        rec = RoundRecord(t, draft, writer=writer, embedding=emb)
        if judged is not None:
            rec.judge_key, rec.judgment = judged
        rounds.append(rec)
        if fixed_tau is not None:
            halt, reason = t >= fixed_tau, "random"
        else:
            decision = tracker.observe(distance, is_of(judged, weights))
            halt, reason = decision.halt, str(decision.reason)
        if halt:
            return LiveResult(scn.scenario_id, t, reason, draft, operational, rounds, tracker.distances, tracker.scores)
        rec.critic, rec.feedback = await critique(scn, cfg, model, t, draft, services)
        operational += rec.critic.usage.total_tokens if rec.critic is not None else 0
        tracker.record_feedback(rec.feedback)
        prev, feedback, prev_emb = draft, rec.feedback, emb
    raise AssertionError("unreachable: the failsafe halts at max_rounds")  # Theorem 1


def metrics_or_nan(result: JudgeResult | None) -> dict[str, float]:
    if result is None:
        return {m: math.nan for m in METRICS}
    return {m: float(result.metrics.get(m, math.nan)) for m in METRICS}
