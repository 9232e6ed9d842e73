"""Semantic early stopping: halt when successive drafts stop changing in embedding space.

Modes (each a policy name; NaN never halts, as in the SHP cascade):

- ``sim_threshold``     cosine similarity to the previous draft >= threshold for the last n rounds
- ``window_mean``       mean distance over the last n rounds < threshold
- ``dynamic_threshold`` similarity >= a threshold that rises with t (looser early, stricter late)
- ``drift``             the distance from the FIRST draft changed by < tol over each of the last n rounds
- ``consensus``         like sim_threshold, over consensus vectors (mean of draft and critique embeddings)

``cap`` halts nothing; the executor's failsafe does (used for best-round runs to T_max).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from shp_ray.policy.checks import check_finite, check_int
from shp_ray.policy.families.family import EMBEDDINGS, Family
from shp_ray.policy.families.signals import RoundSignal

MODES = ("sim_threshold", "window_mean", "dynamic_threshold", "drift", "consensus", "cap")
DEFAULTS: dict[str, dict[str, float]] = {
    "sim_threshold": {"threshold": 0.95, "n": 1},
    "window_mean": {"threshold": 0.06, "n": 2},
    "dynamic_threshold": {"start": 0.90, "end": 0.97, "n": 1},
    "drift": {"tol": 0.02, "n": 2},
    "consensus": {"threshold": 0.95, "n": 1},
    "cap": {},
}
REASONS = {
    "sim_threshold": "similar",
    "window_mean": "window_mean",
    "dynamic_threshold": "dynamic",
    "drift": "drift",
    "consensus": "consensus",
}


def check_params(params: Mapping[str, object]) -> None:
    mode = params.get("mode")
    if mode not in MODES:
        raise ValueError(f"unknown semantic mode {mode!r}; known: {', '.join(MODES)}")
    n = params.get("n", 1)
    check_int(f"{mode}: n", n, 1)
    for key in ("threshold", "start", "end", "tol"):
        if key in params:
            check_finite(f"{mode}: {key}", params[key])


def dynamic_schedule(t: int, start: float, end: float, horizon: int) -> float:
    """Similarity threshold at round t: ``start`` at t = 2 rising linearly to ``end`` at t = horizon."""
    if horizon <= 2:
        return end
    frac = min(1.0, max(0.0, (t - 2) / (horizon - 2)))
    return start + (end - start) * frac


T = TypeVar("T")


def _last(values: Sequence[T], n: int) -> list[T] | None:
    return list(values[-n:]) if len(values) >= n else None


def check(params: Mapping[str, Any], history: Sequence[RoundSignal], horizon: int) -> str | None:
    """The reason this mode halts at the last round of ``history``, or None."""
    mode = str(params["mode"])
    if mode == "cap" or len(history) < 2:
        return None
    n = int(params.get("n", 1))
    dists = [s.distance for s in history[1:]]  # d_2..d_t
    if mode == "sim_threshold":
        last = _last(dists, n)
        hit = last is not None and all(1.0 - d >= params["threshold"] for d in last)
    elif mode == "window_mean":
        last = _last(dists, n)
        hit = last is not None and sum(last) / n < params["threshold"]  # NaN mean compares false
    elif mode == "dynamic_threshold":
        t = history[-1].t
        dated = _last(list(zip(range(t - len(dists) + 1, t + 1), dists, strict=True)), n)  # (round, d_round)
        hit = dated is not None and all(
            1.0 - d >= dynamic_schedule(r, params["start"], params["end"], horizon) for r, d in dated
        )
    elif mode == "drift":
        drifts = [s.drift for s in history]
        changes = [abs(b - a) for a, b in zip(drifts[:-1], drifts[1:], strict=True)]
        last = _last(changes, n)
        hit = last is not None and all(c < params["tol"] for c in last)
    else:  # consensus
        last = _last([s.consensus_distance for s in history[1:]], n)
        hit = last is not None and all(1.0 - d >= params["threshold"] for d in last)
    return REASONS[mode] if hit else None


def _all_last(ok: np.ndarray, n: int) -> np.ndarray:
    """hit[:, t-1]: ok at each of rounds t-n+1..t, all >= 2 (``_last`` of d_2..d_t needs t - 1 >= n)."""
    hit = np.zeros_like(ok, dtype=bool)
    if ok.shape[1] > n:
        hit[:, n:] = True
        for k in range(n):
            hit[:, n:] &= ok[:, n - k : ok.shape[1] - k]
    return hit


def batch_check(params: Mapping[str, Any], cols: Any, horizon: int) -> list[tuple[str, np.ndarray]]:
    """:func:`check` over (trajectory, round) columns (.columns.SignalColumns), the same comparisons."""
    mode = str(params["mode"])
    if mode == "cap":
        return []
    n = int(params.get("n", 1))
    if mode in ("sim_threshold", "consensus"):
        d = cols.distance if mode == "sim_threshold" else cols.consensus
        hit = _all_last(1.0 - d >= params["threshold"], n)
    elif mode == "window_mean":
        total = np.zeros_like(cols.distance)
        width = cols.T - n
        if width > 0:  # summed left to right, as sum() does
            for k in range(n):
                total[:, n:] = total[:, n:] + cols.distance[:, 1 + k : 1 + k + width]
        hit = np.zeros_like(total, dtype=bool)
        hit[:, n:] = total[:, n:] / n < params["threshold"]
    elif mode == "dynamic_threshold":
        need = np.asarray([dynamic_schedule(t, params["start"], params["end"], horizon) for t in range(1, cols.T + 1)])
        hit = _all_last(1.0 - cols.distance >= need[None, :], n)
    elif mode == "drift":
        change = np.full_like(cols.drift, np.nan)
        change[:, 1:] = np.abs(cols.drift[:, 1:] - cols.drift[:, :-1])
        hit = _all_last(change < params["tol"], n)
    else:
        raise ValueError(f"unknown semantic mode {mode!r}")
    return [(REASONS[mode], hit)]


FAMILY = Family(
    kind="semantic",
    label="semantic",
    bases={m: {"mode": m, **DEFAULTS[m]} for m in REASONS},
    check=check,
    check_params=check_params,
    needs_critique=lambda params: params.get("mode") == "consensus",
    batch=batch_check,
    reads=(EMBEDDINGS,),
)
