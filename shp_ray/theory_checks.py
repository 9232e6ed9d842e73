"""Machine-checked claims: Theorem 1, Lemma 1 and Lemma 2 of the SHP analysis.

    python -m shp_ray.theory_checks [--examples N]

prints one line per claim and exits non-zero if any fails. Each claim is a
hypothesis property over generated (including adversarial) inputs; the test
suite runs the same properties. Every executor reaches the cascade through
``cascade.decide`` looked up at call time, so a broken cascade is caught.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shp_ray import policy as policies
from shp_ray.policy import cascade
from shp_ray.policy.cascade import HaltConfig, HaltTracker
from shp_ray.policy.scoring import METRICS, cosine_distance, information_score
from shp_ray.policy.trajectory import Round, Trajectory

# ---- strategies -------------------------------------------------------------

# Distances include exact ties with eps, NaN and the whole [0, 2] range.
distance_values = st.one_of(
    st.floats(0.0, 2.0),
    st.sampled_from([0.0, 0.02, 0.06, 0.059999, 0.060001, 1.0, 2.0, math.nan]),
)
score_values = st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 0.5, 1.0, math.nan]))
scenario_ids = st.text(min_size=1, max_size=8)
feedback_values = st.sampled_from(
    ["", "Revise: add the date.", "APPROVED", "approved.", "  Approved - fine", "Not APPROVED", "APPROVE", "NO"]
)


@st.composite
def halt_configs(draw: st.DrawFn) -> HaltConfig:
    return HaltConfig(
        eps=draw(st.sampled_from([0.0, 0.02, 0.06, 0.1, 2.0]) | st.floats(0.0, 2.0)),
        k=draw(st.integers(1, 8)),
        warmup=draw(st.integers(1, 8)),
        max_rounds=draw(st.integers(1, 8)),
        critic=draw(st.booleans()),
        entropy=draw(st.booleans()),
        gain=draw(st.booleans()),
        min_gain=draw(st.sampled_from([0.0, -0.05, 0.01]) | st.floats(-1.0, 1.0)),
    )


@st.composite
def trajectories(
    draw: st.DrawFn,
    min_depth: int = 1,
    max_depth: int = 10,
    *,
    distances: st.SearchStrategy[float] = distance_values,
    scores: st.SearchStrategy[float] = score_values,
    feedbacks: st.SearchStrategy[str] = feedback_values,
    ids: st.SearchStrategy[str] = scenario_ids,
    gen_id: str = "",
) -> Trajectory:
    """A stored trajectory with adversarial signals (the other executors' tests draw from it too)."""
    depth = draw(st.integers(min_depth, max_depth))
    rounds = tuple(
        Round(
            round=t,
            distance=math.nan if t == 1 else draw(distances),
            is_score=draw(scores),
            feedback="" if t == depth else draw(feedbacks),
            writer_tokens=draw(st.integers(0, 900)),
            critic_tokens=0 if t == depth else draw(st.integers(0, 900)),
            judge_tokens=draw(st.integers(0, 3000)),
        )
        for t in range(1, depth + 1)
    )
    return Trajectory(scenario_id=draw(ids), rounds=rounds, gen_id=gen_id)


# ---- the three executors ----------------------------------------------------


def live_run(traj: Trajectory, cfg: HaltConfig) -> tuple[int, str]:
    """The live loop: signals arrive one round at a time, as in Algorithm 1.

    Raises if the loop would need a round the trajectory does not have
    (a termination failure when the trajectory is deeper than max_rounds).
    """
    tracker = HaltTracker(cfg)
    for r in traj.rounds:
        decision = tracker.observe(None if r.round == 1 else r.distance, r.is_score)
        if decision.halt:
            return tracker.t, str(decision.reason)
        tracker.record_feedback(r.feedback)
    raise RuntimeError(f"loop did not halt within {traj.depth} rounds (max_rounds={cfg.max_rounds})")


def post_hoc_reason(traj: Trajectory, tau: int, cfg: HaltConfig) -> str | None:
    """The reason derived after the fact from the stored prefix x_1..x_tau."""
    return cascade.decide(tau, traj.distances(tau), traj.scores(tau), traj.feedback_before(tau), cfg).reason


# ---- claims -----------------------------------------------------------------

_settings = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=True)


def theorem1_termination(n: int) -> None:
    """tau <= max_rounds for every config and draft sequence, max_rounds = 1 included."""

    @settings(_settings, max_examples=n)
    @given(halt_configs(), st.data())
    def check(cfg: HaltConfig, data: st.DataObject) -> None:
        # Deeper than max_rounds, with adversarial signals: nothing but the failsafe may stop it.
        traj = data.draw(trajectories(min_depth=cfg.max_rounds + 1, max_depth=cfg.max_rounds + 4))
        tau, _ = live_run(traj, cfg)
        assert 1 <= tau <= cfg.max_rounds, (tau, cfg)
        never = replace(cfg, critic=False, entropy=False, gain=False)
        tau_blind, reason = live_run(traj, never)
        assert (tau_blind, reason) == (cfg.max_rounds, "failsafe"), (tau_blind, reason, never)

    check()


def lemma1_well_defined(n: int) -> None:
    """IS in [0, 1] on the simplex; d total, in [0, 2]; zero-norm -> 1.0."""

    @settings(_settings, max_examples=n)
    @given(
        st.lists(st.floats(0.0, 1.0), min_size=len(METRICS), max_size=len(METRICS)),
        st.lists(st.floats(0.0, 1.0), min_size=len(METRICS), max_size=len(METRICS)).filter(lambda w: sum(w) > 1e-6),
        st.integers(1, 16).flatmap(
            lambda dim: st.tuples(
                st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=dim, max_size=dim),
                st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=dim, max_size=dim),
            )
        ),
    )
    def check(metric_values: list[float], raw_w: list[float], pair: tuple[list[float], list[float]]) -> None:
        total = sum(raw_w)
        weights = dict(zip(METRICS, (w / total for w in raw_w), strict=True))
        weights[METRICS[-1]] = max(0.0, 1.0 - sum(weights[m] for m in METRICS[:-1]))
        score = information_score(dict(zip(METRICS, metric_values, strict=True)), weights)
        assert 0.0 <= score <= 1.0, score
        a, b = pair
        d = cosine_distance(a, b)
        assert math.isfinite(d) and 0.0 <= d <= 2.0, (d, a, b)
        assert cosine_distance(np.zeros(len(a)), b) == 1.0
        assert cosine_distance(a, np.zeros(len(b))) == 1.0

    check()


def lemma2_consistency(n: int) -> None:
    """Live decision, post-hoc reason and replay give the same (tau, reason)."""

    @settings(_settings, max_examples=n)
    @given(halt_configs(), st.data())
    def check(cfg: HaltConfig, data: st.DataObject) -> None:
        traj = data.draw(trajectories(min_depth=cfg.max_rounds, max_depth=cfg.max_rounds + 2))
        tau, reason = live_run(traj, cfg)
        assert post_hoc_reason(traj, tau, cfg) == reason
        for t in range(1, tau):
            assert post_hoc_reason(traj, t, cfg) is None, f"round {t} < tau={tau} already halts"
        policy = policies.Policy("probe", "cascade", cfg)
        out = policies.replay(policy, traj)
        assert (out.stop_round, out.reason) == (tau, reason), (out, tau, reason)

    check()


CLAIMS: tuple[tuple[str, Callable[[int], None]], ...] = (
    ("Theorem 1 (termination: tau <= max_rounds, any config, any drafts)", theorem1_termination),
    ("Lemma 1 (IS in [0,1] on the simplex; d total in [0,2]; zero-norm -> 1.0)", lemma1_well_defined),
    ("Lemma 2 (live == post-hoc == replay)", lemma2_consistency),
)


def run(
    examples: int = 2000,
    out: Callable[[str], None] = print,
    claims: tuple[tuple[str, Callable[[int], None]], ...] = CLAIMS,
) -> bool:
    ok = True
    for title, claim in claims:
        try:
            claim(examples)
        except Exception as exc:  # any falsifying example, including an AssertionError
            ok = False
            out(f"FAIL  {title}: {type(exc).__name__}: {exc}")
        else:
            out(f"PASS  {title} [{examples} examples]")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shp_ray.theory_checks", description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000, help="hypothesis examples per claim")
    args = parser.parse_args(argv)
    return 0 if run(args.examples) else 1


if __name__ == "__main__":
    sys.exit(main())
