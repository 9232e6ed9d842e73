"""The stopping policies, pure: the cascade, the policy table, the other families, the live Stopper
and the reference replay. Nothing here does I/O or imports a model, a store or a server
(``make check`` holds it so); generation and analysis build on it, never the reverse.
"""

from shp_ray.policy.cascade import APPROVAL, CONTINUE, REASONS, Decision, HaltConfig, HaltTracker, decide
from shp_ray.policy.reference import Outcome, replay
from shp_ray.policy.scoring import METRICS, cosine_distance, information_score
from shp_ray.policy.stopper import StopDecision, Stopper
from shp_ray.policy.table import (
    ABLATION_CELLS,
    NAMED_CASCADES,
    Policy,
    family_policies,
    policy_by_name,
    standard_policies,
    with_params,
)
from shp_ray.policy.trajectory import Round, Trajectory

__all__ = [
    "ABLATION_CELLS",
    "APPROVAL",
    "CONTINUE",
    "METRICS",
    "NAMED_CASCADES",
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
    "with_params",
]
