"""Stopping policies: the policy table (docs/design.md's named policies, the ablation cells, the families).

A policy is a frozen value: its kind, its cascade parameters (:class:`HaltConfig`)
and, for the other stopping families, their parameters. :mod:`.reference` replays
one over a stored trajectory; the live :class:`.stopper.Stopper` and the DuckDB
replay are held equal to that reference by property tests.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace

from shp_ray.policy import families
from shp_ray.policy.cascade import HaltConfig

# "cascade", "random", "oracle", or a registered family's kind (families.FAMILIES)
Kind = str

# The seven non-empty subsets of {critic, entropy, gain}.
ABLATION_CELLS: dict[str, tuple[bool, bool, bool]] = {
    "abl_full": (True, True, True),
    "abl_no_critic": (False, True, True),
    "abl_no_entropy": (True, False, True),
    "abl_no_gain": (True, True, False),
    "abl_critic_only": (True, False, False),
    "abl_entropy_only": (False, True, False),
    "abl_gain_only": (False, False, True),
}
NAMED_CASCADES: dict[str, tuple[bool, bool, bool]] = {
    "shp": (True, True, True),
    "entropy_only": (False, True, False),
    "critic_only": (True, False, False),
}
FIXED_KS = (1, 3, 6)
_FIXED = re.compile(r"fixed_k(\d+)")
_RANDOM = re.compile(r"random_s(\d+)")


@dataclass(frozen=True)
class Policy:
    """A named stopping rule. ``halt.max_rounds`` is the policy's cap T_max.

    ``fixed_k{k}`` is the cascade with every flag off and max_rounds = k: only
    the failsafe fires, at k.
    """

    name: str
    kind: Kind
    halt: HaltConfig
    seed: int = 0
    # Parameters of a stopping family (shp_ray.policy.families), as sorted (key, value) pairs; () for SHP's kinds.
    params: tuple[tuple[str, object], ...] = ()

    @property
    def family(self) -> bool:
        """Whether this is one of the other stopping systems (semantic, gain_model, verifier)."""
        return self.kind in families.FAMILIES

    @property
    def param_dict(self) -> dict[str, object]:
        return dict(self.params)

    @property
    def consults_is(self) -> bool:
        """Whether the policy needs the judge during the loop (and pays for it)."""
        return self.kind == "oracle" or (self.kind == "cascade" and self.halt.gain)


def cascade_policy(name: str, base: HaltConfig, critic: bool, entropy: bool, gain: bool) -> Policy:
    return Policy(name, "cascade", replace(base, critic=critic, entropy=entropy, gain=gain))


def fixed_policy(k: int, base: HaltConfig) -> Policy:
    return Policy(f"fixed_k{k}", "cascade", replace(base, max_rounds=k, critic=False, entropy=False, gain=False))


def policy_by_name(name: str, base: HaltConfig | None = None) -> Policy:
    """Resolve any policy name of docs/design.md against the base cascade parameters."""
    base = base or HaltConfig()
    if name in NAMED_CASCADES:
        return cascade_policy(name, base, *NAMED_CASCADES[name])
    if name in ABLATION_CELLS:
        return cascade_policy(name, base, *ABLATION_CELLS[name])
    if m := _FIXED.fullmatch(name):
        return fixed_policy(int(m.group(1)), base)
    if m := _RANDOM.fullmatch(name):
        return Policy(name, "random", base, seed=int(m.group(1)))
    if name == "oracle_is":
        return Policy(name, "oracle", base)
    if spec := families.family_spec(name):
        return Policy(name, spec[0], base, params=tuple(sorted(spec[1].items())))
    known = [*NAMED_CASCADES, "fixed_k{k}", "random_s{seed}", "oracle_is", *ABLATION_CELLS, *families.family_names()]
    raise ValueError(f"unknown policy {name!r}; known: {', '.join(known)}")


def standard_policies(base: HaltConfig | None = None, random_seeds: tuple[int, ...] = (0,)) -> list[Policy]:
    """Every policy of docs/design.md's table, plus the baseline fixed_k{max_rounds}."""
    base = base or HaltConfig()
    ks = sorted({*FIXED_KS, base.max_rounds})
    names = [
        *NAMED_CASCADES,
        *(f"fixed_k{k}" for k in ks),
        *(f"random_s{s}" for s in random_seeds),
        "oracle_is",
        *ABLATION_CELLS,
    ]
    return [policy_by_name(n, base) for n in names]


def family_policies(base: HaltConfig | None = None) -> list[Policy]:
    """The other stopping systems at their defaults, capped at ``base.max_rounds``."""
    return [policy_by_name(n, base) for n in families.family_names()]


def with_params(policy: Policy, **params: object) -> Policy:
    """A family policy with some parameters replaced (e.g. ``model=`` a fitted gain model's JSON)."""
    if not policy.family:
        raise ValueError(f"{policy.name} is not a stopping family; it has no params")
    merged = {**policy.param_dict, **params}
    families.registry.check_params(policy.kind, merged, policy.name)
    return replace(policy, params=tuple(sorted(merged.items())))


def random_stop_round(seed: int, scenario_id: str, max_rounds: int) -> int:
    """Uniform in 1..max_rounds, deterministic in (seed, scenario_id).

    The first 15 hex digits of sha256 (60 bits) fit a signed 64-bit integer,
    so SQL can compute the same value.
    """
    digest = hashlib.sha256(f"{seed}:{scenario_id}".encode()).hexdigest()
    return int(digest[:15], 16) % max_rounds + 1
