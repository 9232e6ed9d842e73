"""The SQL replay and the decide() UDF equal the reference executor on random trajectories.

Hypothesis draws trajectories with ties at eps, NaN distances and scores,
T = 1, k > T, eps = 0, max_rounds > depth and tricky critic approvals; every
executor gets the SAME per-round numbers, so a difference is a cascade bug,
not float noise (the distance computation is checked separately).
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.replay.db import SIGNAL_COLUMNS, connect_signals, set_policies
from analysis.replay.signals import load_signals
from analysis.sql import APPROVED_REGEX
from shp_ray import theory_checks
from shp_ray.policy.cascade import KNOBS, HaltConfig, approved
from shp_ray.policy.reference import replay
from shp_ray.policy.table import Policy, fixed_policy
from shp_ray.policy.trajectory import Round, Trajectory

EPS_TIES = [0.0, 0.02, 0.06, 0.1]
# Mostly values AT the eps choices, so ties decide often; some NaN and the full range.
TIES = [0.0, 0.02, 0.06, 0.059999999, 0.060000001, 0.1]
distance_values = st.one_of(
    st.sampled_from(TIES), st.sampled_from(TIES), st.sampled_from([1.0, 2.0, math.nan]), st.floats(0.0, 2.0)
)
score_values = st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 0.5, 0.52, 1.0, math.nan]))
tricky_feedback = st.sampled_from(
    [
        "",
        "APPROVED",
        "approved.",
        "  Approved - fine",
        "\t\n\x0bAPPROVED",
        "\u3000\u00a0approved",
        "\u200bAPPROVED",  # zero-width space is not whitespace to Python: no approval
        "Not APPROVED",
        "APPROVE",
        "\u1e9apPROVED",
        "Revise: add the date.",
    ]
)
feedback_values = st.one_of(tricky_feedback, st.text(alphabet="aApPrRoOvVeEdD \t\u00a0\u2003x", max_size=12))


# What each cascade knob is drawn from: every knob, so a knob's rule in the SQL executor is held to decide()'s.
KNOB_DRAWS: dict[str, st.SearchStrategy] = {
    "eps": st.sampled_from(EPS_TIES) | st.sampled_from([2.0]) | st.floats(0.0, 2.0),
    "k": st.integers(1, 3) | st.integers(1, 9),
    "warmup": st.integers(1, 4) | st.integers(1, 9),
    "max_rounds": st.integers(1, 9),
    "critic": st.booleans(),
    "entropy": st.booleans(),
    "gain": st.booleans(),
    "min_gain": st.sampled_from([0.0, -0.05, 0.02]) | st.floats(-1.0, 1.0),
}


@st.composite
def configs(draw: st.DrawFn) -> HaltConfig:
    return HaltConfig(**{name: draw(values) for name, values in KNOB_DRAWS.items()})


def test_every_cascade_knob_is_drawn() -> None:
    """A new knob of HaltConfig is drawn here too, or the SQL executor's form of its rule is never tested."""
    assert list(KNOB_DRAWS) == [k.name for k in KNOBS], "draw the new cascade knob in KNOB_DRAWS"


def trajectories(index: int) -> st.SearchStrategy[Trajectory]:
    return theory_checks.trajectories(
        1,
        8,
        distances=distance_values,
        scores=score_values,
        feedbacks=feedback_values,
        ids=st.text(alphabet="abcxyz019-:é漢 ", min_size=1, max_size=8),
        gen_id=f"g{index}",
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Trajectory], list[Policy]]:
    n = draw(st.integers(1, 4))
    trajs = [draw(trajectories(i)) for i in range(n)]
    cfgs = draw(st.lists(configs(), min_size=1, max_size=4))
    pols = [Policy(f"c{i}", "cascade", c) for i, c in enumerate(cfgs)]
    pols.append(Policy("rnd", "random", draw(configs()), seed=draw(st.integers(0, 10**9))))
    pols.append(Policy("orc", "oracle", draw(configs())))
    pols.append(fixed_policy(draw(st.integers(1, 9)), HaltConfig()))
    return trajs, pols


def signals_table(trajs: list[Trajectory]) -> pa.Table:
    rows = [
        {
            "gen_id": tr.gen_id,
            "scenario_id": tr.scenario_id,
            "round": r.round,
            "distance": r.distance,
            "is_score": r.is_score,
            "feedback": r.feedback,
            "writer_tokens": r.writer_tokens,
            "critic_tokens": r.critic_tokens,
            "judge_tokens": r.judge_tokens,
        }
        for tr in trajs
        for r in tr.rounds
    ]
    return pa.Table.from_pylist(rows, schema=SIGNAL_COLUMNS)


@pytest.fixture(scope="module")
def con():
    empty = signals_table([Trajectory("s", (Round(1),))])
    c = connect_signals(empty, [])
    yield c
    c.close()


def load(con, trajs: list[Trajectory], pols: list[Policy]) -> None:
    load_signals(con, signals_table(trajs))
    set_policies(con, pols)


def same_is(a: float | None, b: float) -> bool:
    a = math.nan if a is None else a
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_sql_and_udf_replay_equal_reference(con, case) -> None:
    trajs, pols = case
    load(con, trajs, pols)
    by_key = {(t.gen_id, t.scenario_id): t for t in trajs}
    for view in ("replay", "replay_udf"):
        rows = con.sql(
            f"SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens,"
            f" final_is FROM {view}"
        ).fetchall()
        assert len(rows) == len(trajs) * len(pols)
        named = {p.name: p for p in pols}
        for name, gid, sid, tau, reason, op, ev, fin in rows:
            ref = replay(named[name], by_key[(gid, sid)])
            got = (tau, reason, op, ev)
            assert got == (ref.stop_round, ref.reason, ref.operational_tokens, ref.evaluation_tokens), (view, name)
            assert same_is(fin, ref.final_is), (view, name, fin, ref.final_is)


def test_baseline_columns_equal_fixed_k_depth(con) -> None:
    trajs = [
        Trajectory("a", tuple(Round(t, writer_tokens=10 * t, critic_tokens=t, is_score=t / 10) for t in (1, 2, 3))),
        Trajectory("b", (Round(1, writer_tokens=7, is_score=math.nan),)),
    ]
    load(con, trajs, [fixed_policy(3, HaltConfig())])
    rows = con.sql(
        "SELECT scenario_id, operational_tokens, baseline_tokens, final_is, baseline_is FROM replay"
    ).fetchall()
    got = {sid: (op, base, fin, bis) for sid, op, base, fin, bis in rows}
    assert got["a"] == (60 + 1 + 2, 60 + 1 + 2, 0.3, 0.3)
    assert got["b"][:2] == (7, 7) and got["b"][2] is None and got["b"][3] is None


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet="aApPrRoOvVeEdD \t\n\x0b\x0c\x1c\x85\u00a0\u1680\u2000\u2028\u3000\u200bK\u212a\u017f", max_size=14
    )
)
def test_approval_regex_equals_python(con, text: str) -> None:
    got = con.execute("SELECT regexp_matches(?, ?)", [text, APPROVED_REGEX]).fetchone()[0]
    assert got == approved(text)
