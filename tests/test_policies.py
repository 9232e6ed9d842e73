"""Policies and the reference replay executor: names, stop rounds, token accounting."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from shp_ray.policy.cascade import HaltConfig
from shp_ray.policy.reference import replay
from shp_ray.policy.table import ABLATION_CELLS, policy_by_name, random_stop_round, standard_policies
from shp_ray.policy.trajectory import Round, Trajectory


def make_traj(distances, scores, feedback=None, writer=100, critic=10, judge=1000, sid="q1"):
    n = len(scores)
    feedback = feedback or ["Revise"] * (n - 1) + [""]
    rounds = tuple(
        Round(
            round=t,
            distance=math.nan if t == 1 else distances[t - 2],
            is_score=scores[t - 1],
            feedback=feedback[t - 1],
            writer_tokens=writer * t,  # distinct per round, so sums identify the rounds paid
            critic_tokens=0 if t == n else critic * t,
            judge_tokens=judge * t,
        )
        for t in range(1, n + 1)
    )
    return Trajectory(sid, rounds)


TABLE_I = make_traj([0.144, 0.027, 0.007, 0.003, 0.2], [0.54, 0.62, 0.64, 0.62, 0.66, 0.60])


def test_standard_policy_names_are_the_design_table():
    names = [p.name for p in standard_policies()]
    assert names == [
        "shp",
        "entropy_only",
        "critic_only",
        "fixed_k1",
        "fixed_k3",
        "fixed_k6",
        "random_s0",
        "oracle_is",
        *ABLATION_CELLS,
    ]
    assert len(ABLATION_CELLS) == 7
    assert (
        len({flags for flags in ABLATION_CELLS.values()}) == 7 and (False, False, False) not in ABLATION_CELLS.values()
    )


def test_baseline_follows_max_rounds():
    names = [p.name for p in standard_policies(HaltConfig(max_rounds=4))]
    assert "fixed_k4" in names


def test_table_one_stop_rounds_and_reasons():
    got = {p.name: replay(p, TABLE_I) for p in standard_policies()}
    assert (got["shp"].stop_round, got["shp"].reason) == (4, "entropy")
    assert (got["entropy_only"].stop_round, got["entropy_only"].reason) == (4, "entropy")
    assert (got["critic_only"].stop_round, got["critic_only"].reason) == (6, "failsafe")
    assert (got["abl_gain_only"].stop_round, got["abl_gain_only"].reason) == (4, "no_gain")
    assert got["fixed_k3"].stop_round == 3 and got["fixed_k1"].stop_round == 1
    assert (got["oracle_is"].stop_round, got["oracle_is"].reason) == (5, "oracle")
    assert got["oracle_is"].final_is == 0.66


def test_operational_and_evaluation_tokens():
    shp = replay(policy_by_name("shp"), TABLE_I)  # tau = 4, consults IS
    writer = 100 * (1 + 2 + 3 + 4)
    critic = 10 * (1 + 2 + 3)
    judge = 1000 * (1 + 2 + 3 + 4)
    assert shp.operational_tokens == writer + critic + judge
    assert shp.evaluation_tokens == 1000 * 4  # judging x_tau, never charged

    ent = replay(policy_by_name("entropy_only"), TABLE_I)  # tau = 4, judge-free
    assert ent.operational_tokens == writer + critic

    k1 = replay(policy_by_name("fixed_k1"), TABLE_I)
    assert k1.operational_tokens == 100 and k1.evaluation_tokens == 1000

    oracle = replay(policy_by_name("oracle_is"), TABLE_I)  # tau = 5 but pays all 6 rounds
    assert oracle.operational_tokens == 100 * 21 + 10 * 15 + 1000 * 21
    assert oracle.evaluation_tokens == 1000 * 5


def test_max_rounds_is_capped_at_the_generated_depth():
    short = make_traj([0.5, 0.5], [0.1, 0.2, 0.3])  # depth 3
    out = replay(policy_by_name("fixed_k6"), short)
    assert (out.stop_round, out.reason) == (3, "failsafe")
    assert replay(policy_by_name("critic_only"), short).stop_round == 3
    assert replay(policy_by_name("oracle_is"), short).stop_round == 3
    assert all(1 <= replay(p, short).stop_round <= 3 for p in standard_policies())


def test_critic_approval_stops_the_round_after_it():
    traj = make_traj([0.5, 0.5, 0.5], [0.1, 0.2, 0.3, 0.4], feedback=["Revise", "APPROVED", "Revise", ""])
    out = replay(policy_by_name("critic_only"), traj)
    assert (out.stop_round, out.reason) == (3, "critic")  # f_2 approves; x_3 was already written


def test_random_policy_is_deterministic_and_uniform():
    assert random_stop_round(7, "abc", 6) == random_stop_round(7, "abc", 6)
    counts = Counter(random_stop_round(1, f"s{i}", 6) for i in range(6000))
    assert set(counts) == set(range(1, 7))
    assert all(abs(c - 1000) < 150 for c in counts.values())
    seeds_differ = sum(random_stop_round(1, f"s{i}", 6) != random_stop_round(2, f"s{i}", 6) for i in range(200))
    assert seeds_differ > 100
    out = replay(policy_by_name("random_s3"), TABLE_I)
    assert out.stop_round == random_stop_round(3, "q1", 6) and out.reason == "random"


def test_oracle_ignores_nan_and_takes_the_first_maximum():
    traj = make_traj([0.5, 0.5, 0.5], [math.nan, 0.7, 0.7, 0.2])
    assert replay(policy_by_name("oracle_is"), traj).stop_round == 2
    all_nan = make_traj([0.5], [math.nan, math.nan])
    assert replay(policy_by_name("oracle_is"), all_nan).stop_round == 1


def test_unknown_policy_name():
    with pytest.raises(ValueError, match="unknown policy 'fixed_kx'"):
        policy_by_name("fixed_kx")


def test_trajectory_rounds_must_be_contiguous():
    with pytest.raises(ValueError, match="1..T"):
        Trajectory("x", (Round(round=2),))
    with pytest.raises(ValueError, match="no rounds"):
        Trajectory("x", ())
