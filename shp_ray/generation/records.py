"""A finished trajectory -> plain row dicts for the store's tables (cheap to ship between actors)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import numpy as np
import pyarrow.compute as pc

from shp_ray.generation.answer_config import Extractor, answer_rows, pick_extractor
from shp_ray.generation.datasets import Scenario
from shp_ray.generation.embedder import text_hash
from shp_ray.generation.judge import JudgeResult
from shp_ray.generation.loop import TrajectoryResult
from shp_ray.policy.cascade import APPROVAL
from shp_ray.policy.logprobs import DEFAULT_LAST_K, STATS, summarise
from shp_ray.policy.round_signals import RoundColumns, trajectory_signals
from shp_ray.policy.scorers import Scorer, score_rows, task_of
from shp_ray.policy.scoring import METRICS, cosine_distance, information_score
from shp_ray.policy.trajectory import Round, Trajectory
from shp_ray.policy.weights import uniform
from shp_ray.providers.base import LIVE
from storage.parts import Store


def scenario_row(scn: Scenario) -> dict[str, object]:
    return {
        "scenario_id": scn.scenario_id,
        "dataset": scn.dataset,
        "split": scn.split,
        "question": scn.question,
        "contexts": list(scn.contexts),
        "ground_truth": scn.ground_truth,
        "references": list(scn.references),
        "meta_json": json.dumps(scn.meta, sort_keys=True, default=str),
        "task_id": scn.task,
        "epoch": scn.epoch,
    }


def trajectory_rows(
    result: TrajectoryResult,
    gen_id: str,
    dim: int,
    embedder: str,
    approval: str = APPROVAL,
    scorers: Sequence[Scorer] = (),
    extractor: Extractor | None = None,
    last_k: int = DEFAULT_LAST_K,
) -> dict[str, list[dict[str, object]]]:
    """Rows of rounds, their signals and scores, judgments, failures and the scenario for one trajectory.

    A failed trajectory has no rounds (only its failure rows): the store holds
    whole trajectories or none. ``embedder``: the name the generations row records; ``approval``: the
    prompt preset's approval marker (what the stored ``approved`` signal reads in a critique);
    ``scorers``: what scores each draft (a scorer that raises records the error on its rows); ``extractor``: what
    reads each draft's answer (``draft_answers``; None: no answers); ``last_k``: the tail the ``draft_logprobs``
    summaries average (written for each draft whose Writer call returned token log-probabilities).
    """
    sid = result.scenario.scenario_id
    rounds, judgments = [], []
    for r in result.rounds:
        emb = r.embedding if r.embedding is not None and r.embedding.shape == (dim,) else np.zeros(dim, np.float32)
        w, c = r.writer, r.critic
        rounds.append(
            {
                "gen_id": gen_id,
                "scenario_id": sid,
                "round": r.round,
                "draft": r.draft,
                "feedback": r.feedback,
                "draft_hash": r.draft_hash,
                "writer_prompt_tokens": w.usage.prompt_tokens if w else 0,
                "writer_completion_tokens": w.usage.completion_tokens if w else 0,
                "critic_prompt_tokens": c.usage.prompt_tokens if c else 0,
                "critic_completion_tokens": c.usage.completion_tokens if c else 0,
                "writer_latency_s": w.latency_s if w else 0.0,
                "critic_latency_s": c.latency_s if c else 0.0,
                "embedding": np.asarray(emb, dtype=np.float32),
                # how each call was paid (a cache hit keeps its paid mode); no call (the last critic): live, 0 tokens
                "writer_mode": w.mode if w else LIVE,
                "critic_mode": c.mode if c else LIVE,
            }
        )
        if r.judgment is not None:
            judgments.append(_judgment_row(sid, r.judge_key, r.draft_hash, r.judgment))
    now = datetime.now(UTC)
    signals = signal_rows(rounds, {sid: result.scenario.ground_truth}, {gen_id: embedder}, approval)
    scn = result.scenario
    task = task_of(sid, scn.question, scn.ground_truth, scn.references, scn.meta)
    items = [(task, r["round"], r["draft"]) for r in rounds]
    scores = score_rows(scorers, gen_id, items)
    answers = [] if extractor is None else answer_rows(extractor, gen_id, items)
    drafted = [(r.round, r.writer.logprobs if r.writer is not None else None) for r in result.rounds]
    failures = [
        {
            "gen_id": gen_id,
            "scenario_id": f.scenario_id,
            "round": f.round,
            "stage": f.stage,
            "error_type": f.error_type,
            "message": f.message,
            "created_at": now,
        }
        for f in result.failures
    ]
    return {
        "scenarios": [scenario_row(result.scenario)],
        "rounds": rounds,
        "signals": signals,
        "scores": scores,
        "draft_answers": answers,
        "draft_logprobs": logprob_rows(gen_id, sid, drafted, last_k),
        "judgments": judgments,
        "failures": failures,
    }


def logprob_rows(
    gen_id: str, sid: str, drafts: Sequence[tuple[int, Sequence[float] | None]], last_k: int = DEFAULT_LAST_K
) -> list[dict[str, object]]:
    """The ``draft_logprobs`` rows of a trajectory's (round, its draft's token log-probabilities) pairs: one per draft
    whose Writer reply carried them (none for a provider that returns none: the token-confidence family is then left
    out, never run on zeros). The generation writes them, and shp-import from a log that holds them."""
    out: list[dict[str, object]] = []
    for t, lps in drafts:
        summary = summarise(lps, last_k)
        if summary is not None and lps is not None:
            out.append({"gen_id": gen_id, "scenario_id": sid, "round": t, "tokens": len(lps), "k": last_k, **summary})
    return out


def _judgment_row(scenario_id: str, key: str, draft_hash: str, j: JudgeResult) -> dict[str, object]:
    """The judgments row of one judged draft."""
    return {
        "judge_key": key,
        "judge": j.judge,
        "judge_prompt_version": j.prompt_version,
        "scenario_id": scenario_id,
        "draft_hash": draft_hash,
        **{m: float(j.metrics.get(m, math.nan)) for m in METRICS},
        "judge_prompt_tokens": j.prompt_tokens,
        "judge_completion_tokens": j.completion_tokens,
        "error": j.error,
        "judge_mode": j.mode,
    }


# The columns of a rounds row that its signals are computed from (besides the embedding).
_SIGNAL_INPUTS = (
    "gen_id", "scenario_id", "round", "draft", "feedback", "draft_hash", "writer_prompt_tokens",
    "writer_completion_tokens", "critic_prompt_tokens", "critic_completion_tokens", "writer_mode", "critic_mode",
)  # fmt: skip


def signal_rows(
    rounds: list[dict[str, object]],
    gold: Mapping[str, str | None],
    embedder: Mapping[str, str],
    approval: str = APPROVAL,
) -> list[dict[str, object]]:
    """The ``signals`` rows of whole trajectories' rounds rows (sorted by trajectory and round)."""
    if not rounds:
        return []
    columns = RoundColumns.of_rounds({k: [r[k] for r in rounds] for k in _SIGNAL_INPUTS})
    embeddings = np.stack([np.asarray(r["embedding"], dtype=np.float32) for r in rounds])
    cols = trajectory_signals(columns, embeddings, gold, embedder, approval)
    return [dict(zip(cols, values, strict=True)) for values in zip(*cols.values(), strict=True)]


def load_trajectories(
    store: Store, gen_id: str, judge: str | None = None, weights: Mapping[str, float] | None = None
) -> dict[str, Trajectory]:
    """Stored trajectories of one generation, as the reference replay reads them.

    d_t from consecutive stored embeddings (zero vector -> 1.0), IS_t from the
    judgments of ``judge`` (NaN where unjudged), token counts per call. For
    tests and small stores; the DuckDB layer does the same in SQL at scale.
    """
    weights = weights or uniform()
    rounds = store.read("rounds")
    rounds = rounds.filter(pc.equal(rounds["gen_id"], gen_id))
    judged: dict[tuple[str, str], tuple[float, int]] = {}
    jt = store.read("judgments")
    if judge is not None:
        jt = jt.filter(pc.equal(jt["judge"], judge))
    for row in jt.to_pylist():
        metrics = {m: (math.nan if row[m] is None else row[m]) for m in METRICS}
        tokens = int(row["judge_prompt_tokens"] or 0) + int(row["judge_completion_tokens"] or 0)
        judged[(row["scenario_id"], row["draft_hash"])] = (information_score(metrics, weights), tokens)
    # Inputs of the other stopping families: contexts, and critique embeddings where stored.
    gens = store.read("generations", columns=["gen_id", "embedder"]).to_pylist()
    embedder = next((g["embedder"] for g in gens if g["gen_id"] == gen_id), None)
    critique_vecs = {
        r["text_hash"]: np.asarray(r["embedding"], dtype=np.float32)
        for r in store.read("feedback_embeddings").to_pylist()
        if r["embedder"] == embedder
    }
    contexts = {
        r["scenario_id"]: r["contexts"]
        for r in store.read("scenarios", columns=["scenario_id", "contexts"]).to_pylist()
    }
    answers, confidence = stored_answers(store, gen_id), stored_confidence(store, gen_id)
    by_scenario: dict[str, list[dict]] = {}
    for row in rounds.to_pylist():
        by_scenario.setdefault(row["scenario_id"], []).append(row)
    out = {}
    for sid, rows in by_scenario.items():
        rows.sort(key=lambda r: r["round"])
        built, prev = [], None
        for row in rows:
            emb = np.asarray(row["embedding"], dtype=np.float32)
            is_score, judge_tokens = judged.get((sid, row["draft_hash"]), (math.nan, 0))
            built.append(
                Round(
                    round=row["round"],
                    distance=math.nan if prev is None else cosine_distance(emb, prev),
                    is_score=is_score,
                    feedback=row["feedback"],
                    writer_tokens=row["writer_prompt_tokens"] + row["writer_completion_tokens"],
                    critic_tokens=row["critic_prompt_tokens"] + row["critic_completion_tokens"],
                    judge_tokens=judge_tokens,
                    draft=row["draft"],
                    embedding=emb,
                    feedback_embedding=critique_vecs.get(text_hash(row["feedback"])) if row["feedback"] else None,
                )
            )
            prev = emb
        meta: dict[str, object] = {"contexts": tuple(contexts.get(sid) or ())}
        if answers is not None:  # each draft's stated answer, for the answer-based families
            meta["answers"] = [answers.get((sid, r.round)) for r in built]
        if confidence is not None:  # each draft's log-probability summaries, for the token-confidence family
            meta["confidence"] = [confidence.get((sid, r.round)) for r in built]
        out[sid] = Trajectory(sid, tuple(built), gen_id, meta=meta)
    return out


def stored_answers(store: Store, gen_id: str) -> dict[tuple[str, int], str | None] | None:
    """(scenario, round) -> the answer its draft states, by the extractor a replay reads (pick_extractor); None when
    the generation has no stored answers."""
    rows = [r for r in store.read("draft_answers").to_pylist() if r["gen_id"] == gen_id]
    if not rows:
        return None
    chosen = pick_extractor({r["extractor"] for r in rows})
    return {(r["scenario_id"], r["round"]): r["answer"] for r in rows if r["extractor"] == chosen}


def stored_confidence(store: Store, gen_id: str) -> dict[tuple[str, int], dict[str, float]] | None:
    """(scenario, round) -> its draft's token log-probability summaries (draft_logprobs); None when the generation
    has none stored."""
    rows = [r for r in store.read("draft_logprobs").to_pylist() if r["gen_id"] == gen_id]
    return {(r["scenario_id"], r["round"]): {s: r[s] for s in STATS} for r in rows} or None
