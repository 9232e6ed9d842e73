"""shp-ray: stopping-policy sweeps over iterative Writer -> Critic agent loops.

The library surface for a user's own loop::

    from shp_ray import HaltConfig, decide
    from shp_ray import Stopper        # feed drafts in, get halt/continue + reason out
"""

from .halting import CONTINUE, REASONS, Decision, HaltConfig, HaltTracker, decide
from .policies import Outcome, Policy, family_policies, policy_by_name, replay, standard_policies
from .scoring import METRICS, cosine_distance, information_score
from .stopper import StopDecision, Stopper
from .trajectory import Round, Trajectory

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
