"""Fit the ``gain_model`` stopping policy on a store's DEV split; store it as a versioned artefact.

    model, path = fit_gain_model(store, gen_id)   # -> <store>/artefacts/gain_model/<gen_id>/<fit>.json

A job's policies are fitted through :func:`analysis.stats.fitted.with_fitted`, which registers this fit.

The features come from the same :class:`shp_ray.policy.families.SignalState` the replay
runs, the targets IS_{t+1} - IS_t from the DuckDB views (the judge's scores, used
for TRAINING only). Test trajectories are never read: the fit filters on
``scenarios.split``, so the replay on test measures out-of-sample stopping.

The artefact is named by what it was fitted to (``<fit>``: a digest of the judge, weights, split and
hyper-parameters), so two judges' fits of one generation sit side by side, and it holds no timestamp:
the fit is deterministic, so fitting again writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from analysis import sql
from analysis.replay.db import AnalysisError, ReplayScope, connect, setup_of
from analysis.replay.family_replay import row_inputs
from shp_ray.policy.families import gain_model
from shp_ray.policy.families.signals import RoundSignal, SignalState
from storage.parts import Store

log = logging.getLogger("shp_ray.gain_fit")
ARTEFACT_DIR = "artefacts/gain_model"


def fit_key(meta: Mapping[str, object]) -> str:
    """The artefact's name within its generation: a digest of what the fit depends on besides the data."""
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:16]


def _artefact_name(gen_id: str, fit: str) -> str:
    """The artefact's path within the store."""
    return f"{ARTEFACT_DIR}/{gen_id}/{fit}.json"


def artefact_path(store: Store, gen_id: str, fit: str) -> Path | str:
    """``<store>/artefacts/gain_model/<gen_id>/<fit>.json``: a path for a local store, the object's URI for a
    remote one."""
    if not store.local:
        return f"{store.uri}/{_artefact_name(gen_id, fit)}"
    return Path(store.path) / _artefact_name(gen_id, fit)


def fit_gain_model(
    store: Store,
    gen_id: str,
    *,
    judge: str | None = None,
    weights: Mapping[str, float] | str | None = None,
    split: str = "dev",
    n_components: int = 3,
    lam: float = 1.0,
) -> tuple[gain_model.GainModel, Path | str]:
    """Fit on the ``split`` trajectories of ``gen_id`` and write the artefact (atomically)."""
    con = connect(ReplayScope(store, judge=judge, weights=weights, policies=(), gen_id=gen_id))
    try:
        setup = setup_of(con)
        rows = con.execute(sql.query("gain_fit_rows"), [split]).fetchall()
    finally:
        con.close()
    if not rows:
        raise AnalysisError(f"store {store.uri}: no {split!r}-split trajectories of generation {gen_id!r} to fit on")
    histories, scores = [], []
    for _sid, drafts, embs, fbs, wt, ct, contexts, s in rows:
        embeddings, crit, tokens = row_inputs(embs, fbs, wt, ct)
        state = SignalState(contexts or ())
        for t, draft in enumerate(drafts):
            state.push(draft, embeddings[t], crit[t], tokens[t])
        histories.append(state.history)
        scores.append([math.nan if v is None else v for v in s])
    meta = {"gen_id": gen_id, "split": split, "judge": setup.judge, "weights": setup.weights}
    key = fit_key({**meta, "n_components": n_components, "lam": lam})
    model = fit(histories, scores, n_components=n_components, lam=lam, meta={**meta, "n_trajectories": len(rows)})
    if store.local:
        path: Path | str = save(model, artefact_path(store, gen_id, key))
    else:  # one upload: the object appears whole
        store.put_bytes(f"{store.path}/{_artefact_name(gen_id, key)}", model.to_json().encode())
        path = artefact_path(store, gen_id, key)
    log.info("gain model %s fitted on %d %s trajectories -> %s", model.digest, len(rows), split, path)
    return model, path


# --- the ridge fit itself (numpy, closed form); the policy package only predicts -----------------


def fit(
    histories: Sequence[Sequence[RoundSignal]],
    scores: Sequence[Sequence[float]],
    *,
    n_components: int = 3,
    lam: float = 1.0,
    meta: Mapping[str, object] | None = None,
) -> gain_model.GainModel:
    """Ridge on rounds t >= 2 with IS_t and IS_{t+1} known (dev split only: the caller's duty)."""
    crit = [s.critique.astype(np.float64) for h in histories for s in h if s.critique is not None]
    if len(crit) > n_components and n_components > 0:
        c = np.stack(crit)
        pca_mean = c.mean(axis=0)
        _, _, vt = np.linalg.svd(c - pca_mean, full_matrices=False)
        components = vt[:n_components]
    else:
        pca_mean, components = np.zeros(0), np.zeros((0, 0))
    xs, ys = [], []
    for h, s in zip(histories, scores, strict=True):
        for i in range(1, len(h) - 1):  # round t = i + 1 >= 2 with a next round
            gain = s[i + 1] - s[i]
            if math.isfinite(gain):
                xs.append(gain_model.feature_vector(h[i], pca_mean, components))
                ys.append(gain)
    if len(xs) < 2:
        raise ValueError(f"gain model: {len(xs)} training rounds with known IS_t and IS_(t+1); need >= 2")
    x, y = np.stack(xs), np.asarray(ys)
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    z = (x - mu) / sd
    y0 = y.mean()
    coef = np.linalg.solve(z.T @ z + lam * np.eye(z.shape[1]), z.T @ (y - y0))
    names = (*gain_model.BASE_FEATURES, *(f"critique_pc{i + 1}" for i in range(len(components))))
    return gain_model.GainModel(
        version=gain_model.VERSION,
        features=names,
        pca_mean=tuple(map(float, pca_mean)),
        pca_components=tuple(tuple(map(float, row)) for row in components),
        x_mean=tuple(map(float, mu)),
        x_scale=tuple(map(float, sd)),
        coef=tuple(map(float, coef)),
        intercept=float(y0),
        lam=float(lam),
        n_train=len(ys),
        meta=dict(meta or {}),
    )


def save(model: gain_model.GainModel, path: str | Path) -> Path:
    """Write the artefact atomically (never half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".partial")
    tmp.write_text(model.to_json())
    tmp.replace(path)
    return path
