"""Other stopping systems, replayable next to SHP: semantic, learned gain, verifier-first, best-round.

One module per family holds pure functions over :class:`.signals.RoundSignal`
histories and declares itself as one :class:`.family.Family` value; :mod:`.registry`
lists them; :mod:`.engine` runs any of them round by round for the live Stopper,
the reference executor and the DuckDB UDF alike.
"""

from shp_ray.policy.families.engine import FamilyRun, StoredRounds, params_json, run_trajectory
from shp_ray.policy.families.family import Family
from shp_ray.policy.families.gain_model import GainModel
from shp_ray.policy.families.registry import (
    FAMILIES,
    FAMILY_BASES,
    family,
    family_names,
    family_spec,
    register,
)
from shp_ray.policy.families.signals import RoundSignal, SignalState, qa_verifier, register_verifier
from shp_ray.policy.families.text import canonical, canonical_hash, clean_text

__all__ = [
    "FAMILIES",
    "FAMILY_BASES",
    "Family",
    "FamilyRun",
    "GainModel",
    "RoundSignal",
    "SignalState",
    "StoredRounds",
    "canonical",
    "canonical_hash",
    "clean_text",
    "family",
    "family_names",
    "family_spec",
    "params_json",
    "qa_verifier",
    "register",
    "register_verifier",
    "run_trajectory",
]
