"""What a sweep job does before replaying the other stopping families (shp_ray.policy.families).

1. A fitted family (``gain_model``) is fitted on the DEV split only: when the job replays another
   split, the dev questions are generated too (by the job, through ``generate_dev``:
   once, under the same lock and cache as any generation) and the ridge artefact
   is written beside the store.
2. Critiques are embedded once each (``feedback_embeddings``) for ``consensus``
   and the gain model's critique features.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from conf.spec import JobSpec
from shp_ray.generation.datasets import Scenario
from shp_ray.policy.families.registry import unfitted
from shp_ray.policy.table import Policy
from storage.parts import Store

log = logging.getLogger("shp_ray.sweep")


def dev_split_needed(job: JobSpec) -> bool:
    """Whether the job generates the dev questions too: a gain model to fit, on a split other than dev."""
    needs_fit = any(unfitted(p.kind, p.param_dict) for p in job.policies)
    return needs_fit and job.split != "dev"


def prepare_families(
    job: JobSpec,
    store: Store,
    gen_id: str,
    judge: str | None,
    weights: dict[str, float],
    dev: list[Scenario],
    generate_dev: Callable[[], object],
) -> tuple[Policy, ...]:
    """The job's policies, ready to replay: gain models fitted, critiques embedded.

    ``dev``: the dev questions the gain model is fitted on; ``generate_dev`` stores their trajectories.
    """
    from analysis.stats.fitted import with_fitted
    from shp_ray.generation.embedder import Embedder
    from shp_ray.generation.feedback_embed import embed_feedback

    policies = job.policies
    if not any(p.family for p in policies):
        return policies
    if dev_split_needed(job) and dev:
        log.info("gain_model: generating the %d dev-split questions it is fitted on", len(dev))
        generate_dev()
    new = embed_feedback(store, Embedder(job.generation.embedder), [gen_id])
    log.info("stopping families: embedded %d new critique texts", new)
    fitted: Any = with_fitted(policies, store, gen_id, judge=judge, weights=weights)
    return tuple(fitted)
