"""A SYNTHETIC trajectory store: real schemas, made-up numbers.

Used by the analysis tests and ``shp-bench replay`` to exercise the DuckDB
layer without a model. Everything it writes is named synthetic (dataset,
model, judge), so a report over it can never pass for a real experiment.

Embeddings follow a random walk on the unit sphere whose step shrinks with
the round (drafts settle, as Conjecture 1 expects), so distances span the
interesting range around eps; a few drafts are empty (zero vector), a few
metrics are NaN (unparsed judge replies) and the critic sometimes approves.
Calls are live unless ``batch_rate`` makes a share of them batch calls; the generation's
provider kind is ``synthetic``, which no shipped price table prices (its costs are NULL
unless a table gives ``synthetic`` a price, as the benchmark and the cost tests do).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from storage.parts import Store
from storage.schemas import EMBEDDING_DIM, METRIC_COLUMNS, rounds_schema

SYNTHETIC_JUDGE = "synthetic-v1 (random metrics, not an LLM; synthetic data)"
SYNTHETIC_MODEL = "synthetic (no model; generated numbers)"
SYNTHETIC_DATASET = "synthetic"
SYNTHETIC_KIND = "synthetic"  # the provider kind in its generations row (gen_id_parts.provider_kind)


@dataclass(frozen=True)
class SyntheticSpec:
    n_trajectories: int = 100
    rounds: int = 6
    dim: int = EMBEDDING_DIM
    seed: int = 0
    approve_rate: float = 0.08  # chance that a critique starts with APPROVED
    empty_draft_rate: float = 0.005  # zero-vector embeddings (d_t = 1.0)
    nan_metric_rate: float = 0.01  # unparsed judge replies
    unjudged_rate: float = 0.0  # rounds with no judgment row at all
    gen_id: str = "synthetic-gen"
    chunk: int = 20_000  # trajectories per Parquet part (bounds memory)
    ragged: bool = False  # draw each trajectory's depth uniformly in 1..rounds
    batch_rate: float = 0.0  # chance that a call (writer, critic, judge) was paid in batch mode
    draft_words: int = 0  # filler words per draft (0: a short line), for drafts of a real model's size


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


_WORDS = ("the", "answer", "draft", "context", "revise", "claim", "evidence", "source", "question", "round", "fact")


def _filler(n: int, salt: int) -> str:
    """``n`` words, each round's a little different (so a browser shows diffs), deterministic in ``salt``."""
    return " ".join(_WORDS[(k * 7 + salt * (k % 5 == 0)) % len(_WORDS)] for k in range(n))


def _embeddings(rng: np.random.Generator, n: int, depth: int, dim: int, empty: np.ndarray) -> np.ndarray:
    """(n, depth, dim) float32 unit vectors: a shrinking random walk per trajectory."""
    out = np.empty((n, depth, dim), dtype=np.float32)
    e = rng.standard_normal((n, dim)).astype(np.float32)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    out[:, 0] = e
    step = rng.uniform(0.15, 0.8, size=(n, 1)).astype(np.float32)
    decay = rng.uniform(0.35, 0.95, size=(n, 1)).astype(np.float32)
    for t in range(1, depth):
        noise = rng.standard_normal((n, dim)).astype(np.float32) / np.float32(np.sqrt(dim))
        e = e + step * noise
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        out[:, t] = e
        step = step * decay
    out[empty] = 0.0
    return out


def write_synthetic_store(root: str | Path, spec: SyntheticSpec | None = None) -> Store:
    """Write scenarios, generations, rounds and judgments of ``spec`` under ``root``."""
    spec = spec or SyntheticSpec()
    if spec.n_trajectories < 1 or spec.rounds < 1 or spec.dim < 1:
        raise ValueError(f"synthetic store needs n_trajectories, rounds, dim >= 1, got {spec}")
    store = Store(root)
    rng = np.random.default_rng(spec.seed)
    store.write(
        "generations",
        pa.table(
            {
                "gen_id": [spec.gen_id],
                "model": [SYNTHETIC_MODEL],
                "prompt_version": ["synthetic"],
                "max_rounds": [spec.rounds],
                "temperature": [0.0],
                "seed": [spec.seed],
                "embedder": ["synthetic random walk (no encoder)"],
                "embedding_dim": [spec.dim],
                "config_json": [
                    json.dumps(
                        {
                            "synthetic": True,
                            "spec": spec.__dict__,
                            "gen_id_parts": {"provider_kind": SYNTHETIC_KIND, "model": SYNTHETIC_MODEL},
                        }
                    )
                ],
                "created_at": [datetime.now(UTC)],
            }
        ),
    )
    schema = rounds_schema(spec.dim)
    for start in range(0, spec.n_trajectories, spec.chunk):
        n = min(spec.chunk, spec.n_trajectories - start)
        _write_chunk(store, rng, spec, start, n, schema)
    return store


@dataclass(frozen=True)
class _Draws:
    """One chunk's random draws, taken from ``rng`` in one fixed order: that order fixes a seed's synthetic store."""

    depths: np.ndarray  # (n,) rounds of each trajectory
    empty: np.ndarray  # (n, depth) empty drafts
    emb: np.ndarray  # (n, depth, dim)
    approve: np.ndarray  # (n, depth) the critic approves
    tok: np.ndarray  # (n, depth, 4) writer prompt/completion, critic prompt/completion
    lat: np.ndarray  # (n, depth, 2) writer, critic latency
    metrics: np.ndarray  # (n, depth, 4) judged metrics, NaN where missing
    judged: np.ndarray  # (n, depth)
    mode: np.ndarray  # (n, depth, 3) "batch"/"live" of the writer, critic and judge call of each round

    @classmethod
    def take(cls, rng: np.random.Generator, spec: SyntheticSpec, n: int) -> _Draws:
        depth = spec.rounds
        depths = rng.integers(1, depth + 1, size=n) if spec.ragged else np.full(n, depth)
        empty = rng.random((n, depth)) < spec.empty_draft_rate
        emb = _embeddings(rng, n, depth, spec.dim, empty)
        approve = rng.random((n, depth)) < spec.approve_rate
        tok = rng.integers(200, 1200, size=(n, depth, 4))
        lat = rng.uniform(0.2, 3.0, size=(n, depth, 2))
        # IS drifts up then plateaus, with noise: no_gain and oracle have work to do.
        base = rng.uniform(0.3, 0.8, size=(n, 1)) + np.cumsum(rng.normal(0.02, 0.05, size=(n, depth)), axis=1)
        metrics = np.clip(base[:, :, None] + rng.normal(0.0, 0.08, size=(n, depth, 4)), 0.0, 1.0)
        metrics[rng.random((n, depth, 4)) < spec.nan_metric_rate] = np.nan
        judged = rng.random((n, depth)) >= spec.unjudged_rate
        batch = rng.random((n, depth, 3)) < spec.batch_rate
        return cls(depths, empty, emb, approve, tok, lat, metrics, judged, np.where(batch, "batch", "live"))


def _scenarios_table(ids: list[str]) -> pa.Table:
    return pa.table(
        {
            "scenario_id": ids,
            "dataset": [SYNTHETIC_DATASET] * len(ids),
            "split": ["dev" if int(_hash(s)[:2], 16) < 64 else "test" for s in ids],
            "question": [f"Synthetic question {s}?" for s in ids],
            "contexts": [[f"Synthetic context {j} of {s}." for j in range(4)] for s in ids],
            "ground_truth": [f"answer {s}" for s in ids],
            "references": [[] for _ in ids],
            "meta_json": ['{"synthetic": true}'] * len(ids),
        }
    )


def _draft_texts(spec: SyntheticSpec, ids: list[str], d: _Draws, ii: np.ndarray, tt: np.ndarray) -> list[str]:
    # another generation's drafts differ (as a real one's would): their judgments never collide
    tag = "" if spec.gen_id == SyntheticSpec.gen_id else f" ({spec.gen_id})"
    drafts = ["" if d.empty[i, t] else f"Draft {t + 1} of {ids[i]}{tag}." for i, t in zip(ii, tt, strict=True)]
    if spec.draft_words:
        depth = spec.rounds
        drafts = [
            x and f"{x} {_filler(spec.draft_words, i * depth + t)}" for x, i, t in zip(drafts, ii, tt, strict=True)
        ]
    return drafts


def _rounds_table(spec: SyntheticSpec, ids: list[str], d: _Draws, drafts: list[str], hashes: list[str]) -> pa.Table:
    ii, tt = np.nonzero(np.arange(spec.rounds)[None, :] < d.depths[:, None])
    last = tt + 1 == d.depths[ii]
    feedback = [
        "" if is_last else ("APPROVED - looks complete." if d.approve[i, t] else f"Revise round {t + 1}: add detail.")
        for i, t, is_last in zip(ii, tt, last, strict=True)
    ]
    critic_tok = np.where(last[:, None], 0, d.tok[ii, tt, 2:4])
    return pa.table(
        {
            "gen_id": [spec.gen_id] * len(ii),
            "scenario_id": [ids[i] for i in ii],
            "round": (tt + 1).astype(np.int32),
            "draft": drafts,
            "feedback": feedback,
            "draft_hash": hashes,
            "writer_prompt_tokens": d.tok[ii, tt, 0],
            "writer_completion_tokens": d.tok[ii, tt, 1],
            "critic_prompt_tokens": critic_tok[:, 0],
            "critic_completion_tokens": critic_tok[:, 1],
            "writer_latency_s": d.lat[ii, tt, 0],
            "critic_latency_s": np.where(last, 0.0, d.lat[ii, tt, 1]),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(d.emb[ii, tt].reshape(-1), pa.float32()), spec.dim),
            "writer_mode": d.mode[ii, tt, 0],
            "critic_mode": np.where(last, "live", d.mode[ii, tt, 1]),  # no critic call at the last round
        }
    )


def _judgments_table(
    rng: np.random.Generator, ids: list[str], d: _Draws, rounds: tuple[np.ndarray, np.ndarray], hashes: list[str]
) -> pa.Table:
    """One judgment per distinct (scenario, draft) that is judged: the judge cache key."""
    ii, tt = rounds
    seen: set[tuple[str, str]] = set()
    rows: list[int] = []
    for j, (i, t) in enumerate(zip(ii, tt, strict=True)):
        key = (ids[i], hashes[j])
        if d.judged[i, t] and key not in seen:
            seen.add(key)
            rows.append(j)
    sel = np.asarray(rows, dtype=np.int64)
    si, st = ii[sel], tt[sel]
    return pa.table(
        {
            "judge_key": [_hash(f"{SYNTHETIC_JUDGE}|{ids[i]}|{hashes[j]}") for i, j in zip(si, sel, strict=True)],
            "judge": [SYNTHETIC_JUDGE] * len(sel),
            "judge_prompt_version": ["synthetic-v1"] * len(sel),
            "scenario_id": [ids[i] for i in si],
            "draft_hash": [hashes[j] for j in sel],
            **{m: d.metrics[si, st, c] for c, m in enumerate(METRIC_COLUMNS)},
            "judge_prompt_tokens": rng.integers(800, 2000, size=len(sel)),
            "judge_completion_tokens": rng.integers(20, 120, size=len(sel)),
            "error": [""] * len(sel),
            "judge_mode": d.mode[si, st, 2],
        }
    )


def _write_chunk(
    store: Store, rng: np.random.Generator, spec: SyntheticSpec, start: int, n: int, schema: pa.Schema
) -> None:
    """Write trajectories ``start .. start + n`` into every table; the judge's token counts are drawn last."""
    ids = [f"syn-{i:07d}" for i in range(start, start + n)]
    store.write("scenarios", _scenarios_table(ids))
    d = _Draws.take(rng, spec, n)
    ii, tt = np.nonzero(np.arange(spec.rounds)[None, :] < d.depths[:, None])  # the rounds that exist
    drafts = _draft_texts(spec, ids, d, ii, tt)
    hashes = [_hash(x) for x in drafts]
    store.write("rounds", _rounds_table(spec, ids, d, drafts, hashes), schema)
    store.write("judgments", _judgments_table(rng, ids, d, (ii, tt), hashes))
