"""The per-round signals the replay reads, computed once where the rounds are made.

Every policy replay needs, per round, d_t (the distance to the previous draft), whether the critique
approved, the token counts (with their prompt share and how each call was paid, for its cost in
dollars) and whether the draft is right (HotpotQA EM / F1). Recomputing d_t means
reading every 384-d embedding of the store and pairing each round with the previous one; so the
generation (which holds both embeddings) computes these numbers once and the store keeps them as
the small ``signals`` table. Opening a store then reads scalar columns only.

One function computes them for every writer (the generation, ``shp-query --signals rebuild``, the
benchmark's synthetic store): :func:`trajectory_signals` over a run of rounds sorted by trajectory
and round. d_t uses :func:`shp_ray.policy.scoring.row_cosine_distances`, the arithmetic the live
Stopper uses too, so stored, rebuilt and live values are equal bit for bit.

``SIGNALS_VERSION`` names how they are computed: a stored row of another version is not believed
(the reader recomputes it from the embeddings), so a changed formula can never leave stale numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from shp_ray.policy.answer import answer_scores
from shp_ray.policy.cascade import APPROVAL, approved
from shp_ray.policy.scoring import row_cosine_distances

SIGNALS_VERSION = "signals-v1"


def consecutive_distances(embeddings: np.ndarray, first: np.ndarray) -> np.ndarray:
    """d_t of each row against the row before it; NaN where ``first`` (round 1 of a trajectory).

    ``embeddings``: (n, dim) rows sorted by (trajectory, round); ``first``: (n,) bool, True at each
    trajectory's first round. Vectorised over the whole run (a part of the store at a time).
    """
    e = np.asarray(embeddings)
    out = np.full(len(e), np.nan, dtype=np.float64)
    if len(e) > 1:
        out[1:] = row_cosine_distances(e[1:], e[:-1])
    out[np.asarray(first, dtype=bool)] = np.nan
    return out


@dataclass(frozen=True)
class RoundColumns:
    """Rounds sorted by (gen_id, scenario_id, round), each trajectory whole, as columns: the draft, the critique
    (``feedback``), the draft's hash and each agent's tokens (``writer_tokens``, ``critic_tokens``: prompt and
    completion). The prompt tokens and call modes are copied as given (None: not given, NULL, and a reader
    takes them from the rounds)."""

    gen_id: Sequence[str]
    scenario_id: Sequence[str]
    round: Sequence[int]
    draft: Sequence[str | None]
    feedback: Sequence[str | None]
    draft_hash: Sequence[str]
    writer_tokens: Sequence[int]
    critic_tokens: Sequence[int]
    writer_prompt_tokens: Sequence[int] | None = None
    critic_prompt_tokens: Sequence[int] | None = None
    writer_mode: Sequence[str] | None = None
    critic_mode: Sequence[str] | None = None

    @classmethod
    def of_rounds(cls, c: Mapping[str, Sequence]) -> RoundColumns:
        """From columns of the ``rounds`` table (each agent's prompt and completion tokens, its call mode)."""
        wp, cp = c["writer_prompt_tokens"], c["critic_prompt_tokens"]
        return cls(
            c["gen_id"], c["scenario_id"], c["round"], c["draft"], c["feedback"], c["draft_hash"],
            writer_tokens=[p + q for p, q in zip(wp, c["writer_completion_tokens"], strict=True)],
            critic_tokens=[p + q for p, q in zip(cp, c["critic_completion_tokens"], strict=True)],
            writer_prompt_tokens=wp, critic_prompt_tokens=cp, writer_mode=c["writer_mode"],
            critic_mode=c["critic_mode"],
        )  # fmt: skip


def trajectory_signals(
    columns: RoundColumns,
    embeddings: np.ndarray,
    gold: Mapping[str, str | None],
    embedder: Mapping[str, str],
    approval: str | Mapping[str, str] = APPROVAL,
) -> dict[str, list[object]]:
    """The ``signals`` columns of ``columns`` (rounds sorted by (gen_id, scenario_id, round), each trajectory
    whole) and their ``embeddings`` (one row per round).

    ``gold``: scenario_id -> its gold answer (None: unknown, EM/F1 NULL); ``embedder``: gen_id -> the
    generation's embedder. ``approval``: the prompt preset's approval marker, or gen_id ->
    its generation's (a gen_id not in it: APPROVED). Raises ValueError on rounds that are not 1..T in order
    per trajectory.
    """
    c = columns
    gen_id, scenario_id, rounds = c.gen_id, c.scenario_id, c.round
    n = len(rounds)
    g, sc, t = np.asarray(gen_id, dtype=object), np.asarray(scenario_id, dtype=object), np.asarray(rounds)
    first = np.ones(n, dtype=bool)
    if n > 1:
        first[1:] = (g[1:] != g[:-1]) | (sc[1:] != sc[:-1])
    expected = np.ones(n, dtype=np.int64)
    if n > 1:
        expected[1:] = np.where(first[1:], 1, t[:-1] + 1)
    bad = np.flatnonzero(t != expected)
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"signals need whole trajectories in round order: gen_id={gen_id[i]!r} "
            f"scenario_id={scenario_id[i]!r} has round {rounds[i]} where round {expected[i]} was expected"
        )
    distances = consecutive_distances(embeddings, first)
    markers = approval if isinstance(approval, Mapping) else {gi: approval for gi in set(gen_id)}
    answers = [answer_scores(d or "", gold.get(s)) for d, s in zip(c.draft, scenario_id, strict=True)]
    return {
        "gen_id": list(gen_id),
        "scenario_id": list(scenario_id),
        "round": list(rounds),
        "draft_hash": list(c.draft_hash),
        "distance": [None if f else float(d) for f, d in zip(first, distances, strict=True)],
        "approved": [approved(f, markers.get(gi, APPROVAL)) for gi, f in zip(gen_id, c.feedback, strict=True)],
        "writer_tokens": list(c.writer_tokens),
        "critic_tokens": list(c.critic_tokens),
        "has_answer_line": [a[0] for a in answers],
        "answer_em": [a[1] for a in answers],
        "answer_f1": [a[2] for a in answers],
        "embedder": [embedder.get(g, "") for g in gen_id],
        "signals_version": [SIGNALS_VERSION] * n,
        "writer_prompt_tokens": _given(c.writer_prompt_tokens, n),
        "critic_prompt_tokens": _given(c.critic_prompt_tokens, n),
        "writer_mode": _given(c.writer_mode, n),
        "critic_mode": _given(c.critic_mode, n),
    }


def _given(values: Sequence[object] | None, n: int) -> list[object]:
    return [None] * n if values is None else list(values)
