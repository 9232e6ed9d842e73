"""Fitted stopping families, fitted before the replay reads them: one fit per family and generation.

A family whose policies read an artefact fitted on a store's dev split declares it (``Family(fitted=Fitted(param,
load))``: the parameter the artefact rides on) and registers its fit here, in :data:`FITS`. The sweep, the paper's
results and the benchmarks fit every unfitted policy of a job through :func:`with_fitted`; a new fitted family is
its module, its registration in the policy registry and its line here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from analysis.replay.db import AnalysisError
from analysis.stats import gain_fit
from shp_ray.policy.families.registry import FAMILIES, unfitted
from shp_ray.policy.table import Policy, with_params
from storage.parts import Store

log = logging.getLogger("shp_ray.fitted")

# (store, gen_id, judge, weights) -> the artefact as its parameter's value; written into the store (versioned)
Weights = Mapping[str, float] | str | None
Fit = Callable[[Store, str, str | None, Weights], str]
FITS: dict[str, Fit] = {
    "gain_model": lambda store, gen_id, judge, weights: gain_fit.fit_gain_model(
        store, gen_id, judge=judge, weights=weights
    )[0].to_json(),
}


def with_fitted(
    policies: Iterable[Policy],
    store: Store,
    gen_id: str,
    *,
    judge: str | None = None,
    weights: Weights = None,
) -> list[Policy]:
    """The policies with every unfitted one fitted on the dev split of ``gen_id`` (one fit per family).

    A family without dev trajectories (or without a registered fit) stays unfitted, said in one line: its policies
    run to the cap with the reason ``unfitted``.
    """
    policies = list(policies)
    fits: dict[str, str | None] = {}
    for i, p in enumerate(policies):
        if not unfitted(p.kind, p.param_dict):
            continue
        if p.kind not in fits:
            fits[p.kind] = _fit(p.kind, store, gen_id, judge, weights)
        value, fitted = fits[p.kind], FAMILIES[p.kind].fitted
        if value is not None and fitted is not None:
            policies[i] = with_params(p, **{fitted.param: value})
    return policies


def _fit(kind: str, store: Store, gen_id: str, judge: str | None, weights: Weights) -> str | None:
    if kind not in FITS:
        log.warning(
            "%s stays UNFITTED (it will run to the cap): no fit is registered for it (analysis.stats.fitted)", kind
        )
        return None
    try:
        return FITS[kind](store, gen_id, judge, weights)
    except (AnalysisError, ValueError) as exc:
        log.warning("%s stays UNFITTED (it will run to the cap): %s", kind, exc)
        return None
