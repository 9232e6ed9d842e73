"""``report.primary`` checked as early as it can be known, so a misspelt outcome costs no generation and no replay.

The outcomes a job's replay will have: the scores of its generation and IS where a judge can score the tasks.

- Before generation (the plan, a dry run's too): the scores the job's scorers declare (``hotpot``: em, f1;
  ``tests``: hidden_pass, visible_pass; exact / contains / regex: their name) and those the store already holds for
  the generation (an import, a ``shp-import --rescore``). A ``python`` scorer names its scores only in its results:
  then the check waits for the generation.
- Before the replay: the scores stored for the generation, which now hold every scorer's.

IS: a judge (judge.kind is not none) on tasks it can score -- the lexical judge scores a draft against the task's
contexts, so on tasks without any (code, most files of one's own) every IS is NaN (shp_ray.generation.judge).
The replay's own check (analysis.stats.outcomes.primary over the replayed scope) stays the last word.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from analysis.errors import AnalysisError
from analysis.stats.outcomes import check_requested
from conf.spec import JobSpec
from shp_ray.generation.datasets import Scenario
from shp_ray.generation.score_config import ScoreConfigError, build
from storage.parts import Store
from storage.resume import column_values


def declared_scores(job: JobSpec) -> set[str] | None:
    """The scores the job's scorers give, when each declares them in advance (None: a python scorer's are known only
    from its results)."""
    names: set[str] = set()
    for spec in job.generation.scores:
        try:
            declared = build(spec).names
        except ScoreConfigError:  # refused when the config was resolved: not here
            return None
        if not declared:
            return None
        names |= set(declared)
    return names


def stored_scores(store: Store | None, gen_id: str) -> set[str] | None:
    """The scores the store holds for the generation (empty: none yet, or no store); None: unreadable."""
    if store is None:
        return set()
    try:
        return column_values(store, "scores", "score", ("gen_id", gen_id))
    except (OSError, pa.ArrowException):  # a damaged part: the job's own check names it, and stops
        return None


def judged(job: JobSpec, scenarios: Sequence[Scenario]) -> bool:
    """Whether the job's judge can give an IS on these tasks."""
    judge = job.generation.judge
    return judge != "none" and (judge != "lexical" or any(s.contexts for s in scenarios))


def refusal(
    job: JobSpec, scenarios: Sequence[Scenario], store: Store | None, gen_id: str, generated: bool
) -> str | None:
    """Why ``report.primary`` names no outcome this job's replay can have (one line naming those it can), or None:
    it does, no primary is asked for, or the outcomes are not known yet. ``generated``: the generation is stored,
    so its scores are all there."""
    requested = job.report.primary
    if not requested:
        return None
    stored = stored_scores(store, gen_id)
    declared = set() if generated else declared_scores(job)
    if stored is None or declared is None:
        return None
    try:
        check_requested(requested, stored | declared, judged(job, scenarios), "this job")
    except AnalysisError as exc:
        return str(exc)
    return None
