"""Token confidence: halt at the first round whose draft's own token log-probabilities say the model is sure.

DeepConf (Fu et al., "Deep Think with Confidence", 2025) filters and stops sampled reasoning traces by the model's
token confidence: the mean over a trace, its lowest token groups ("bottom 10%") or its tail; dynamic early exit
(Yang et al., "Dynamic Early Exit in Reasoning Models", 2025) stops once a trial answer's tokens are confident.
Over a Writer -> Critic loop the rule reads each draft's stored summary (shp_ray.policy.logprobs: ``mean``,
``min``, ``tail10``, ``last_k`` of the sampled tokens' log-probabilities, in nats) and halts at round t when draft
t's ``stat`` >= ``threshold`` (a log-probability, <= 0: -0.1 is a geometric-mean token probability of 0.905).
A draft without log-probabilities never halts it; a store without any leaves the family out of the replay.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from shp_ray.policy.families.agreement import number
from shp_ray.policy.families.family import Family
from shp_ray.policy.families.signals import RoundSignal
from shp_ray.policy.logprobs import STATS


def check_params(params: Mapping[str, object]) -> None:
    if params.get("stat") not in STATS:
        raise ValueError(f"confidence: stat must be one of {', '.join(STATS)}, got {params.get('stat')!r}")
    number("confidence", params, "threshold", -math.inf, 0.0, open_=False)  # a log-probability: above 0 never halts


def check(params: Mapping[str, object], history: Sequence[RoundSignal], horizon: int) -> str | None:
    """Halt at round t when draft t's confidence ``stat`` reaches ``threshold`` (None: no log-probabilities)."""
    conf = history[-1].confidence
    return "confident" if conf is not None and conf[str(params["stat"])] >= params["threshold"] else None  # type: ignore[operator]


FAMILY = Family(
    kind="confidence",
    label="token confidence",
    bases={"confidence": {"stat": "mean", "threshold": -0.1}},
    check=check,
    check_params=check_params,
    needs_logprobs=True,
)
