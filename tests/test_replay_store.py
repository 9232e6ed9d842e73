"""The DuckDB views over a SYNTHETIC store written through storage.Store with the real schemas.

Replay over the store equals the reference executor for every policy and
trajectory; d_t equals shp_ray.policy.scoring.cosine_distance within float32
tolerance; IS_t equals shp_ray.policy.scoring.information_score exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

import analysis
from analysis.replay.db import SIGNAL_SELECT, AnalysisError, trajectories_from_signals
from analysis.replay.policy_table import grid_policies
from shp_ray.policy.reference import replay
from shp_ray.policy.scoring import cosine_distance, information_score
from shp_ray.policy.table import standard_policies
from shp_ray.policy.trajectory import Trajectory
from storage.parts import Store
from storage.schemas import METRIC_COLUMNS
from storage.synthetic import SyntheticSpec, write_synthetic_store

POLICIES = standard_policies(random_seeds=(0, 7)) + grid_policies([0.0, 0.06, 0.2], [1, 3], warmup=(1, 3))


@pytest.fixture(scope="module")
def store_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    spec = SyntheticSpec(n_trajectories=150, rounds=6, seed=3, ragged=True, unjudged_rate=0.1, nan_metric_rate=0.05)
    write_synthetic_store(root, spec)
    # A second generation config with a different depth in a separate part.
    write_synthetic_store(root, SyntheticSpec(n_trajectories=40, rounds=4, seed=4, gen_id="synthetic-gen-b"))
    return root


@pytest.fixture(scope="module")
def con(store_root):
    c = analysis.connect(store_root, policies=POLICIES)
    yield c
    c.close()


def trajectories_from_view(con) -> dict[tuple[str, str], Trajectory]:
    rows = con.sql(f"SELECT {SIGNAL_SELECT} FROM rounds ORDER BY gen_id, scenario_id, round").fetchall()
    return {(t.gen_id, t.scenario_id): t for t in trajectories_from_signals(rows)}


def test_replay_equals_reference_for_every_policy_and_trajectory(con) -> None:
    trajs = trajectories_from_view(con)
    assert len(trajs) == 190
    rows = con.sql(
        "SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, final_is"
        " FROM replay"
    ).fetchall()
    assert len(rows) == len(trajs) * len(POLICIES)
    named = {p.name: p for p in POLICIES}
    mismatches = []
    for name, gid, sid, tau, reason, op, ev, fin in rows:
        ref = replay(named[name], trajs[(gid, sid)])
        fin = math.nan if fin is None else fin
        same_is = fin == ref.final_is or (math.isnan(fin) and math.isnan(ref.final_is))
        if (tau, reason, op, ev) != (ref.stop_round, ref.reason, ref.operational_tokens, ref.evaluation_tokens):
            mismatches.append((name, sid, (tau, reason, op, ev), ref))
        elif not same_is:
            mismatches.append((name, sid, fin, ref.final_is))
    assert not mismatches, mismatches[:3]
    # Every cascade reason occurs somewhere, so the comparison covered them.
    reasons = {r for (r,) in con.sql("SELECT DISTINCT reason FROM replay").fetchall()}
    assert {"critic", "entropy", "no_gain", "failsafe", "random", "oracle"} <= reasons


def test_distances_match_reference_cosine_distance(con, store_root) -> None:
    raw = Store(store_root).read("rounds", columns=["gen_id", "scenario_id", "round", "embedding"])
    emb = {
        (g, s, t): np.asarray(e, dtype=np.float32)
        for g, s, t, e in zip(*(raw.column(c).to_pylist() for c in raw.column_names), strict=True)
    }
    rows = con.sql("SELECT gen_id, scenario_id, round, distance FROM rounds").fetchall()
    for g, s, t, d in rows:
        if t == 1:
            assert d is None
            continue
        ref = cosine_distance(emb[(g, s, t)], emb[(g, s, t - 1)])
        assert abs(d - ref) < 1e-5, (g, s, t, d, ref)
        assert 0.0 <= d <= 2.0


def test_zero_vector_gives_distance_one(tmp_path) -> None:
    write_synthetic_store(tmp_path, SyntheticSpec(n_trajectories=30, rounds=3, empty_draft_rate=0.3, seed=1))
    c = analysis.connect(tmp_path)
    rows = c.sql(
        "SELECT r.distance FROM rounds r WHERE r.round > 1 AND (r.draft = '' OR EXISTS (SELECT 1 FROM rounds p"
        " WHERE p.gen_id = r.gen_id AND p.scenario_id = r.scenario_id AND p.round = r.round - 1 AND p.draft = ''))"
    ).fetchall()
    assert rows and all(d == 1.0 for (d,) in rows)


@pytest.mark.parametrize(
    "weights",
    [None, {"faithfulness": 0.7, "answer_relevancy": 0.3}, {"context_recall": 0.1, "context_precision": 0.9}],
)
def test_is_score_equals_information_score(store_root, weights) -> None:
    c = analysis.connect(store_root, weights=weights, policies=[])
    w = weights or {m: 0.25 for m in METRIC_COLUMNS}
    rows = c.sql(f"SELECT is_score, {', '.join(METRIC_COLUMNS)}, judge FROM rounds").fetchall()
    for s, *metrics, judge in rows:
        if judge is None:  # unjudged round
            assert s is None
            continue
        ref = information_score(dict(zip(METRIC_COLUMNS, metrics, strict=True)), w)
        assert (s is None and math.isnan(ref)) or s == ref


def test_policy_summary_against_replay(con) -> None:
    rows = con.sql(
        "SELECT gen_id, policy, n, mean_rounds, token_saving, delta_is FROM policy_summary WHERE policy = 'fixed_k6'"
    ).fetchall()
    assert {g for g, *_ in rows} == {"synthetic-gen", "synthetic-gen-b"}
    for _, _, n, _, saving, delta in rows:
        assert saving == 0.0 and delta == 0.0 and n > 0
    (shp_saving,) = con.execute(
        "SELECT (sum(baseline_tokens) - sum(operational_tokens)) / sum(baseline_tokens) FROM replay"
        " WHERE policy = 'shp' AND gen_id = 'synthetic-gen'"
        " AND scenario_id IN (SELECT scenario_id FROM scenarios WHERE split = 'test')"
    ).fetchone()
    (got,) = con.execute(
        "SELECT token_saving FROM policy_summary WHERE policy = 'shp' AND gen_id = 'synthetic-gen' AND split = 'test'"
    ).fetchone()
    assert got == pytest.approx(shp_saving)


def test_unknown_or_ambiguous_judge_is_refused(tmp_path) -> None:
    write_synthetic_store(tmp_path, SyntheticSpec(n_trajectories=5, rounds=2))
    with pytest.raises(AnalysisError, match="no judgments by judge 'gpt-judge'"):
        analysis.connect(tmp_path, judge="gpt-judge")
    other = Store(tmp_path).read("judgments")
    other = other.set_column(other.schema.get_field_index("judge"), "judge", pa.array(["other"] * other.num_rows))
    Store(tmp_path).write("judgments", other)
    with pytest.raises(AnalysisError, match="several judges"):
        analysis.connect(tmp_path)
    assert analysis.connect(tmp_path, judge="other").execute("SELECT count(*) FROM judgments").fetchone()[0] == 10
    by_id = analysis.connect(tmp_path, judge="synthetic-v1")  # the id before the description names it too
    assert (
        analysis.setup_of(by_id).judge.startswith("synthetic-v1 (")
        and by_id.execute("SELECT count(*) FROM judgments").fetchone()[0] == 10
    )


def test_bad_store_is_refused_with_the_trajectory_named(tmp_path) -> None:
    with pytest.raises(AnalysisError, match="no store at"):
        analysis.connect(tmp_path / "missing")
    write_synthetic_store(tmp_path, SyntheticSpec(n_trajectories=3, rounds=2))
    rounds = Store(tmp_path).read("rounds")
    row = rounds.slice(0, 1)  # round 1 of syn-0000000, as round 2 of a trajectory that has no round 1
    row = row.set_column(row.schema.get_field_index("scenario_id"), "scenario_id", pa.array(["syn-0000009"]))
    row = row.set_column(row.schema.get_field_index("round"), "round", pa.array([2], pa.int32()))
    Store(tmp_path).write("rounds", row)
    with pytest.raises(AnalysisError, match="syn-0000009.*1 distinct rounds, rounds 2..2"):
        analysis.connect(tmp_path)


def test_empty_store_opens_with_empty_views(tmp_path) -> None:
    (tmp_path / "rounds").mkdir()
    c = analysis.connect(tmp_path)
    assert c.execute("SELECT count(*) FROM replay").fetchone()[0] == 0
    assert c.execute("SELECT count(*) FROM scenarios").fetchone()[0] == 0


def test_a_draft_judged_twice_by_one_judge_takes_the_lowest_judge_key(tmp_path) -> None:
    """Two judgments of one draft by the same judge (e.g. under two metric sets): the replay's inputs and the
    rounds view take the one with the lowest judge_key, written first or last. A store without such pairs
    skips the pick (judgments_unique) and replays exactly as a connection that keeps it (materialize=False)."""
    write_synthetic_store(tmp_path, SyntheticSpec(n_trajectories=6, rounds=3, seed=5))
    store = Store(tmp_path)
    order = "SELECT * FROM replay ORDER BY policy, gen_id, scenario_id"
    kept = analysis.connect(tmp_path, materialize=False).sql(order).fetchall()
    assert analysis.connect(tmp_path).sql(order).fetchall() == kept
    judgments = store.read("judgments")
    row = judgments.slice(0, 1)
    key, scenario, draft = (row[c][0].as_py() for c in ("judge_key", "scenario_id", "draft_hash"))

    def copy_with(judge_key: str, score: float) -> pa.Table:
        t = row.set_column(row.schema.get_field_index("judge_key"), "judge_key", pa.array([judge_key]))
        for m in METRIC_COLUMNS:
            t = t.set_column(t.schema.get_field_index(m), m, pa.array([score], pa.float64()))
        return t

    def is_of_the_draft() -> tuple[float, float, int]:
        c = analysis.connect(tmp_path)
        the_round = "SELECT round, is_score FROM rounds WHERE scenario_id = ? AND draft_hash = ?"
        (t, view) = c.execute(the_round, [scenario, draft]).fetchone()
        (inputs,) = c.execute(f"SELECT s[{t}] FROM replay_inputs WHERE scenario_id = ?", [scenario]).fetchone()
        (rows,) = c.execute("SELECT count(*) FROM rounds").fetchone()
        c.close()
        return inputs, view, rows

    store.write("judgments", copy_with("0" + key[1:], 0.0))  # sorts before the stored key: the new pick
    assert is_of_the_draft() == (0.0, 0.0, 18)  # 18 rounds: one row per round, not one per judgment
    store.write("judgments", copy_with("f" * len(key), 1.0))  # sorts after it: changes nothing
    assert is_of_the_draft() == (0.0, 0.0, 18)
