"""Stopping policies and the reference replay executor.

A policy is replayed over a stored trajectory (generated to full depth) and
yields (stop_round, reason, operational_tokens, evaluation_tokens, final_is).
This per-trajectory Python executor calls :func:`shp_ray.halting.decide`
round by round; the DuckDB replay is held equal to it by property tests.

Token accounting (DESIGN.md):
  operational = sum_{t<=tau} writer_t + sum_{t<tau} critic_t
                + (policy consults IS ? sum_{t<=tau} judge_t : 0)
  oracle_is pays writer and judge for all T rounds and the critic for T-1.
  evaluation  = judge_tau (a measurement, never charged to the policy).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, replace
from typing import Literal

from . import halting, stoppers
from .halting import HaltConfig
from .trajectory import Trajectory

Kind = Literal["cascade", "random", "oracle", "semantic", "gain_model", "verifier"]

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
    # Parameters of a stopping family (shp_ray.stoppers), as sorted (key, value) pairs; () for SHP's kinds.
    params: tuple[tuple[str, object], ...] = ()

    @property
    def family(self) -> bool:
        """Whether this is one of the other stopping systems (semantic, gain_model, verifier)."""
        return self.kind in stoppers.FAMILY_KINDS

    @property
    def param_dict(self) -> dict[str, object]:
        return dict(self.params)

    @property
    def consults_is(self) -> bool:
        """Whether the policy needs the judge during the loop (and pays for it)."""
        return self.kind == "oracle" or (self.kind == "cascade" and self.halt.gain)


@dataclass(frozen=True)
class Outcome:
    stop_round: int
    reason: str
    operational_tokens: int
    evaluation_tokens: int
    final_is: float


def cascade_policy(name: str, base: HaltConfig, critic: bool, entropy: bool, gain: bool) -> Policy:
    return Policy(name, "cascade", replace(base, critic=critic, entropy=entropy, gain=gain))


def fixed_policy(k: int, base: HaltConfig) -> Policy:
    return Policy(f"fixed_k{k}", "cascade", replace(base, max_rounds=k, critic=False, entropy=False, gain=False))


def policy_by_name(name: str, base: HaltConfig | None = None) -> Policy:
    """Resolve any policy name of DESIGN.md against the base cascade parameters."""
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
    if spec := stoppers.family_spec(name):
        return Policy(name, spec[0], base, params=tuple(sorted(spec[1].items())))  # type: ignore[arg-type]
    known = [*NAMED_CASCADES, "fixed_k{k}", "random_s{seed}", "oracle_is", *ABLATION_CELLS, *stoppers.family_names()]
    raise ValueError(f"unknown policy {name!r}; known: {', '.join(known)}")


def standard_policies(base: HaltConfig | None = None, random_seeds: tuple[int, ...] = (0,)) -> list[Policy]:
    """Every policy of DESIGN.md's table, plus the baseline fixed_k{max_rounds}."""
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
    return [policy_by_name(n, base) for n in stoppers.family_names()]


def with_params(policy: Policy, **params: object) -> Policy:
    """A family policy with some parameters replaced (e.g. ``model=`` a fitted gain model's JSON)."""
    if not policy.family:
        raise ValueError(f"{policy.name} is not a stopping family; it has no params")
    merged = {**policy.param_dict, **params}
    stoppers.registry.check_params(policy.kind, merged, policy.name)
    return replace(policy, params=tuple(sorted(merged.items())))


def family_replay(policy: Policy, traj: Trajectory, cap: int) -> tuple[int, str, int, bool]:
    """(tau, reason, selected round, verified_final) of a family policy over one stored trajectory."""
    rounds = traj.rounds
    missing = [r.round for r in rounds[:cap] if r.embedding is None]
    if missing:
        raise ValueError(f"trajectory {traj.scenario_id!r}: {policy.name} needs draft embeddings; rounds {missing}")
    return stoppers.run_trajectory(
        policy.kind,
        policy.param_dict,
        drafts=[r.draft for r in rounds],
        embeddings=[r.embedding for r in rounds],  # type: ignore[misc]
        # round t reads g_{t-1}, the embedding of the critique the Writer saw before drafting it
        critiques=[None, *(r.feedback_embedding for r in rounds[:-1])],
        tokens=[r.writer_tokens + (rounds[i - 1].critic_tokens if i else 0) for i, r in enumerate(rounds)],
        cap=cap,
        horizon=policy.halt.max_rounds,
        contexts=tuple(traj.meta.get("contexts", ())),  # type: ignore[arg-type]
    )


def random_stop_round(seed: int, scenario_id: str, max_rounds: int) -> int:
    """Uniform in 1..max_rounds, deterministic in (seed, scenario_id).

    The first 15 hex digits of sha256 (60 bits) fit a signed 64-bit integer,
    so SQL can compute the same value.
    """
    digest = hashlib.sha256(f"{seed}:{scenario_id}".encode()).hexdigest()
    return int(digest[:15], 16) % max_rounds + 1


def _first_argmax(values: list[float]) -> int:
    """1-based index of the first maximum; NaN never wins (all NaN -> round 1)."""
    best, best_t = -math.inf, 1
    for t, v in enumerate(values, start=1):
        if not math.isnan(v) and v > best:
            best, best_t = v, t
    return best_t


def cascade_stop(traj: Trajectory, cfg: HaltConfig) -> tuple[int, str]:
    """(tau, reason) of the cascade over a stored trajectory, calling decide per round."""
    for t in range(1, cfg.max_rounds + 1):
        d = halting.decide(t, traj.distances(t), traj.scores(t), traj.feedback_before(t), cfg)
        if d.halt:
            return t, str(d.reason)
    raise AssertionError("unreachable: the failsafe halts at max_rounds")  # Theorem 1


def replay(policy: Policy, traj: Trajectory) -> Outcome:
    """Replay one policy over one full trajectory (the reference executor)."""
    # A policy cannot run past what was generated: cap its T_max at the depth.
    cap = min(policy.halt.max_rounds, traj.depth)
    rounds = traj.rounds
    selected = None
    if policy.family:
        tau, reason, selected, _ = family_replay(policy, traj, cap)
    elif policy.kind == "cascade":
        tau, reason = cascade_stop(traj, replace(policy.halt, max_rounds=cap))
    elif policy.kind == "random":
        tau, reason = random_stop_round(policy.seed, traj.scenario_id, cap), "random"
    else:
        tau, reason = _first_argmax(traj.scores(cap)), "oracle"

    paid = cap if policy.kind == "oracle" else tau  # the oracle must run every round to know
    operational = sum(r.writer_tokens for r in rounds[:paid]) + sum(r.critic_tokens for r in rounds[: paid - 1])
    if policy.consults_is:
        operational += sum(r.judge_tokens for r in rounds[:paid])
    final = rounds[(selected or tau) - 1]  # best-round variants return an earlier draft
    return Outcome(tau, reason, operational, final.judge_tokens, final.is_score)
