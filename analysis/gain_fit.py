"""Fit the ``gain_model`` stopping policy on a store's DEV split; store it as a versioned artefact.

    model, path = fit_gain_model("runs/store", gen_id)          # -> <store>/artefacts/gain_model/<gen_id>.json
    policies = with_fitted_gain_models(policies, "runs/store", gen_id)

The features come from the same :class:`shp_ray.stoppers.SignalState` the replay
runs, the targets IS_{t+1} - IS_t from the DuckDB views (the judge's scores, used
for TRAINING only). Test trajectories are never read: the fit filters on
``scenarios.split``, so the replay on test measures out-of-sample stopping.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from shp_ray.policies import Policy, with_params
from shp_ray.stoppers import gain_model
from shp_ray.stoppers.signals import SignalState
from storage.parts import Store

from .db import AnalysisError, connect, setup_of
from .families import row_inputs

log = logging.getLogger("shp_ray.gain_fit")
ARTEFACT_DIR = "artefacts/gain_model"


def artefact_path(store_root: str | Path, gen_id: str) -> Path:
    store = Store(store_root)
    if not store.local:
        raise AnalysisError(f"gain-model artefacts are written beside local stores only, not {store.uri}")
    return Path(store.path) / ARTEFACT_DIR / f"{gen_id}.json"


def fit_gain_model(
    store_root: str | Path,
    gen_id: str,
    *,
    judge: str | None = None,
    weights: Mapping[str, float] | str | None = None,
    split: str = "dev",
    n_components: int = 3,
    lam: float = 1.0,
) -> tuple[gain_model.GainModel, Path]:
    """Fit on the ``split`` trajectories of ``gen_id`` and write the artefact (atomically)."""
    con = connect(store_root, judge=judge, weights=weights, policies=[], gen_id=gen_id)
    try:
        setup = setup_of(con)
        rows = con.execute(
            "SELECT fi.scenario_id, fi.drafts, fi.embs, fi.fb_embs, fi.wt, fi.ct, fi.contexts, x.s"
            " FROM family_inputs fi JOIN trajectories x USING (gen_id, scenario_id)"
            " WHERE fi.scenario_id IN (SELECT scenario_id FROM scenarios WHERE split = ?) ORDER BY fi.scenario_id",
            [split],
        ).fetchall()
    finally:
        con.close()
    if not rows:
        raise AnalysisError(f"store {store_root}: no {split!r}-split trajectories of generation {gen_id!r} to fit on")
    histories, scores = [], []
    for _sid, drafts, embs, fbs, wt, ct, contexts, s in rows:
        embeddings, crit, tokens = row_inputs(embs, fbs, wt, ct)
        state = SignalState(contexts or ())
        for t, draft in enumerate(drafts):
            state.push(draft, embeddings[t], crit[t], tokens[t])
        histories.append(state.history)
        scores.append([math.nan if v is None else v for v in s])
    meta = {
        "gen_id": gen_id,
        "split": split,
        "judge": setup.judge,
        "weights": setup.weights,
        "n_trajectories": len(rows),
        "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    model = gain_model.fit(histories, scores, n_components=n_components, lam=lam, meta=meta)
    path = gain_model.save(model, artefact_path(store_root, gen_id))
    log.info("gain model %s fitted on %d %s trajectories -> %s", model.digest, len(rows), split, path)
    return model, path


def with_fitted_gain_models(
    policies: Iterable[Policy],
    store_root: str | Path,
    gen_id: str,
    *,
    judge: str | None = None,
    weights: Mapping[str, float] | str | None = None,
) -> list[Policy]:
    """Unfitted ``gain_model`` policies get the model fitted on the dev split (one fit for all).

    Without dev trajectories they stay unfitted: they run to the cap with reason ``unfitted``.
    """
    policies = list(policies)
    todo = [i for i, p in enumerate(policies) if p.kind == "gain_model" and not p.param_dict.get("model")]
    if not todo:
        return policies
    try:
        model, _ = fit_gain_model(store_root, gen_id, judge=judge, weights=weights)
    except (AnalysisError, ValueError) as exc:
        log.warning("gain_model stays UNFITTED (it will run to the cap): %s", exc)
        return policies
    for i in todo:
        policies[i] = replace(with_params(policies[i], model=model.to_json()))
    return policies
