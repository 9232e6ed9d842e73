"""What a sweep job does before replaying the other stopping families (shp_ray.policy.families).

1. ``gain_model`` is fitted on the DEV split only: when the job replays another
   split, the dev questions are generated too (once, under the same lock and
   cache as any generation) and the ridge artefact is written beside the store.
2. Critiques are embedded once each (``feedback_embeddings``) for ``consensus``
   and the gain model's critique features.
"""

from __future__ import annotations

import logging
from typing import Any

from conf.resolve import JobSpec
from shp_ray.generation.datasets import load_scenarios
from shp_ray.policy.table import Policy

log = logging.getLogger("shp_ray.sweep")


def prepare_families(
    job: JobSpec, gen_id: str, run_id: str, command: str, judge: str | None, weights: dict[str, float]
) -> tuple[Policy, ...]:
    from analysis.gain_fit import with_fitted_gain_models
    from shp_ray.generation.embedder import Embedder
    from shp_ray.generation.feedback_embed import embed_feedback
    from storage.parts import Store
    from sweeps.job import ensure_generation

    policies = job.policies
    if not any(p.family for p in policies):
        return policies
    needs_fit = any(p.kind == "gain_model" and not p.param_dict.get("model") for p in policies)
    if needs_fit and job.split != "dev":
        dev = load_scenarios(job.dataset, split="dev", limit=job.limit)
        if dev:
            log.info("gain_model: generating the %d dev-split questions it is fitted on", len(dev))
            ensure_generation(job, dev, run_id, command)
    new = embed_feedback(Store(job.store), Embedder(job.generation.embedder), [gen_id])
    log.info("stopping families: embedded %d new critique texts", new)
    fitted: Any = with_fitted_gain_models(policies, job.store, gen_id, judge=judge, weights=weights)
    return tuple(fitted)
