"""Every family policy over many stored trajectories at once: the DuckDB replay's executor.

The same decisions as :func:`.engine.run_signals` (tau, reason, selected round, verified_final),
computed over :class:`.columns.SignalColumns`: a family's column-wise rule (``Family.batch``) gives,
per reason, whether ``check`` would name it at each round; tau is the first such round up to the
cap (else the cap and the family's cap reason), the reason the first in ``check``'s order. A family
without a column-wise rule (a user's, or params its rule does not cover) runs :mod:`.engine` round
by round over the same signals. Best-round selection is column-wise for every selector.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from shp_ray.policy.families import best_round
from shp_ray.policy.families.columns import SignalColumns
from shp_ray.policy.families.engine import run_signals
from shp_ray.policy.families.registry import family


@dataclass(frozen=True)
class Decisions:
    """One policy over B trajectories: each one's tau, reason, selected round and verified_final."""

    stop_round: np.ndarray  # (B,) int64
    reason: np.ndarray  # (B,) object (str)
    selected: np.ndarray  # (B,) int64
    verified_final: np.ndarray  # (B,) bool


def run_columns(kind: str, params: Mapping[str, object], cols: SignalColumns, *, horizon: int) -> Decisions:
    """:func:`.engine.run_signals` of one policy over every trajectory of ``cols`` (cap = min(horizon, depth))."""
    fam = family(kind)
    params = dict(params)
    verifier = str(params.get("verifier", "qa"))
    cap = np.minimum(int(horizon), cols.depth)
    if np.any(cap < 1):
        raise ValueError(f"cap must be >= 1, got {int(cap.min())}")
    rules = fam.batch(params, cols, horizon) if fam.batch is not None else None
    if rules is None:  # round by round, the engine itself
        out = [
            run_signals(kind, params, cols.history(b, verifier), cap=int(cap[b]), horizon=horizon)
            for b in range(cols.B)
        ]
        return Decisions(
            np.asarray([o[0] for o in out], dtype=np.int64),
            np.asarray([o[1] for o in out], dtype=object),
            np.asarray([o[2] for o in out], dtype=np.int64),
            np.asarray([o[3] for o in out], dtype=bool),
        )
    within = np.arange(cols.T)[None, :] < cap[:, None]
    fired = np.zeros((cols.B, cols.T), dtype=bool)
    for _, hit in rules:
        fired |= hit
    fired &= within
    any_fired = fired.any(axis=1)
    tau = np.where(any_fired, fired.argmax(axis=1) + 1, cap).astype(np.int64)
    reason = np.full(cols.B, fam.cap_reason(params), dtype=object)
    undecided = any_fired.copy()
    rows = np.arange(cols.B)
    for name, hit in rules:  # check's priority order at the stopping round
        here = undecided & hit[rows, tau - 1]
        reason[here] = name
        undecided &= ~here
    sel = select(str(params.get("select", "last")), cols, tau, verifier)
    verified = cols.verified(verifier)[rows, sel - 1]
    return Decisions(tau, reason, sel, verified)


def _latest_max(values: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """best_round._argmax_latest of each row's first tau values: the last maximum, NaN never wins."""
    t = np.arange(values.shape[1])[None, :]
    v = np.where(t < tau[:, None], values, np.nan)
    known = ~np.isnan(v)
    best = np.max(np.where(known, v, -math.inf), axis=1)
    wins = known & (v == best[:, None])
    last = values.shape[1] - 1 - np.argmax(wins[:, ::-1], axis=1)
    return np.where(wins.any(axis=1), last + 1, tau).astype(np.int64)


def select(selector: str, cols: SignalColumns, tau: np.ndarray, verifier: str = "qa") -> np.ndarray:
    """best_round.select of each trajectory's history up to its tau: the 1-based round returned."""
    best_round.check_selector(selector)
    if selector == "last" or cols.B == 0:
        return tau.copy()
    if selector == "grounded":
        return _latest_max(cols.grounded, tau)
    if selector == "verified":
        return _latest_max(np.where(cols.verified(verifier), 1.0, np.nan), tau)
    scores = np.full((cols.B, cols.T), np.nan)  # medoid: the scores of the drafts up to tau, per tau
    for n in np.unique(tau).tolist():
        rows = np.nonzero(tau == n)[0]
        scores[rows, :n] = best_round.medoid_stack(cols.embeddings[rows, :n], cols.norms[rows, :n])
    return _latest_max(scores, tau)
