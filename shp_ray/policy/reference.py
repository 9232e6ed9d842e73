"""The reference replay executor: one policy over one stored trajectory, in plain Python.

A policy is replayed over a trajectory generated to full depth and yields
(stop_round, reason, operational_tokens, evaluation_tokens, final_is), calling
:func:`shp_ray.policy.cascade.decide` round by round. The DuckDB replay and the
live Stopper are held equal to it by property tests.

Token accounting (docs/design.md):
  operational = sum_{t<=tau} writer_t + sum_{t<tau} critic_t
                + (policy consults IS ? sum_{t<=tau} judge_t : 0)
  oracle_is pays writer and judge for all T rounds and the critic for T-1.
  evaluation  = judge_tau (a measurement, never charged to the policy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from shp_ray.policy import cascade, families
from shp_ray.policy.cascade import HaltConfig
from shp_ray.policy.table import Policy, random_stop_round
from shp_ray.policy.trajectory import Trajectory


@dataclass(frozen=True)
class Outcome:
    stop_round: int
    reason: str
    operational_tokens: int
    evaluation_tokens: int
    final_is: float


def family_replay(policy: Policy, traj: Trajectory, cap: int) -> tuple[int, str, int, bool]:
    """(tau, reason, selected round, verified_final) of a family policy over one stored trajectory."""
    rounds = traj.rounds
    missing = [r.round for r in rounds[:cap] if r.embedding is None]
    if missing:
        raise ValueError(f"trajectory {traj.scenario_id!r}: {policy.name} needs draft embeddings; rounds {missing}")
    if families.registry.needs_answers(policy.kind) and traj.meta.get("answers") is None:
        raise ValueError(
            f"trajectory {traj.scenario_id!r}: {policy.name} needs each draft's extracted answer, and none is stored "
            "(shp-import --rescore adds them)"
        )
    if families.registry.needs_logprobs(policy.kind) and traj.meta.get("confidence") is None:
        raise ValueError(
            f"trajectory {traj.scenario_id!r}: {policy.name} needs each draft's token log-probabilities, and none are "
            "stored (logprobs.request=true asks the provider for them)"
        )
    stored = families.StoredRounds(
        drafts=[r.draft for r in rounds],
        embeddings=[r.embedding for r in rounds],  # type: ignore[misc]
        # round t reads g_{t-1}, the embedding of the critique the Writer saw before drafting it
        critiques=[None, *(r.feedback_embedding for r in rounds[:-1])],
        tokens=[r.writer_tokens + (rounds[i - 1].critic_tokens if i else 0) for i, r in enumerate(rounds)],
        contexts=tuple(traj.meta.get("contexts", ())),  # type: ignore[arg-type]
        verdicts=traj.meta.get("verdicts"),  # type: ignore[arg-type]  # the loop's own checks (visible tests)
        answers=traj.meta.get("answers"),  # type: ignore[arg-type]  # each draft's stated answer (draft_answers)
        confidences=traj.meta.get("confidence"),  # type: ignore[arg-type]  # log-probability summaries (draft_logprobs)
    )
    return families.run_trajectory(policy.kind, policy.param_dict, stored, cap=cap, horizon=policy.halt.max_rounds)


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
        d = cascade.decide(t, traj.distances(t), traj.scores(t), traj.feedback_before(t), cfg)
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
