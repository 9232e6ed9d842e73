"""shp-ray: stopping-policy sweeps over iterative Writer -> Critic agent loops.

The library surface for a user's own loop::

    from shp_ray import HaltConfig, decide
    from shp_ray import Stopper        # feed drafts in, get halt/continue + reason out
"""

from shp_ray.live import Stopper
from shp_ray.policy import (
    CONTINUE,
    METRICS,
    REASONS,
    Decision,
    HaltConfig,
    HaltTracker,
    Outcome,
    Policy,
    Round,
    StopDecision,
    Trajectory,
    cosine_distance,
    decide,
    family_policies,
    information_score,
    policy_by_name,
    replay,
    standard_policies,
)

__version__ = "0.1.0"

__all__ = [
    "CONTINUE",
    "METRICS",
    "REASONS",
    "Decision",
    "HaltConfig",
    "HaltTracker",
    "Outcome",
    "Policy",
    "Round",
    "StopDecision",
    "Stopper",
    "Trajectory",
    "cosine_distance",
    "decide",
    "family_policies",
    "information_score",
    "policy_by_name",
    "replay",
    "standard_policies",
]
