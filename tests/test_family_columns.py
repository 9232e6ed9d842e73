"""The column-wise family executor equals the round-by-round one, exactly.

- :class:`SignalColumns` holds, for many trajectories at once, the same per-round signals
  :class:`SignalState` pushes one round at a time (floats bit for bit, NaN where NaN);
- :func:`run_columns` (each family's column rule, best-round selection over columns, the fallback
  for families without a rule) reaches the same (tau, reason, selected, verified_final) as
  :func:`run_signals` for every drawn policy;
- through the real Parquet -> DuckDB path, a store whose rounds are NOT written trajectory by
  trajectory is read sorted instead, and replays to the same rows as the same store in order.
"""

from __future__ import annotations

import math
import os
from dataclasses import fields

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import analysis
from analysis.replay import family_stream
from shp_ray.policy.families.batch import run_columns
from shp_ray.policy.families.columns import SignalColumns
from shp_ray.policy.families.engine import run_signals
from shp_ray.policy.families.signals import VERIFIERS, SignalState, register_verifier
from storage.parts import Store
from storage.schemas import rounds_schema
from tests.test_families_property import CONTEXTS, DIM, DRAFTS, family_policy, make_encoder, write_store

TEXTS = DRAFTS + [
    "Reasoning first.\nFinal answer: Paris",
    "  Paris  ",
    "Ｐａｒｉｓ, the capital",
    "Answer: Rome\nmore text",
    "answer: London\nFinal answer: Lyon, France",
]
register_verifier("has_paris", lambda draft, contexts: "paris" in draft.casefold())


@st.composite
def trajectories(draw: st.DrawFn):
    """(depths, drafts, embeddings, critiques, known, tokens, contexts) of a few trajectories."""
    depths = draw(st.lists(st.integers(1, 6), min_size=1, max_size=5))
    rows = sum(depths)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    drafts = [draw(st.sampled_from(TEXTS)) for _ in range(rows)]
    base = rng.normal(size=(rows, DIM)).astype(np.float32)
    kind = [draw(st.sampled_from(["fresh", "same", "near", "zero"])) for _ in range(rows)]
    emb = base.copy()
    for r, k in enumerate(kind):
        if r and k == "same":
            emb[r] = emb[r - 1]
        elif r and k == "near":
            emb[r] = emb[r - 1] + np.float32(1e-6) * base[r]
        elif k == "zero":
            emb[r] = 0.0
    crit = rng.normal(size=(rows, DIM)).astype(np.float32)
    ckind = [draw(st.sampled_from(["none", "usable", "zero", "nan"])) for _ in range(rows)]
    for r, k in enumerate(ckind):
        if k == "zero":
            crit[r] = 0.0
        elif k == "nan":
            crit[r, 0] = np.nan
    known = np.asarray([k != "none" for k in ckind])
    starts = np.concatenate([[0], np.cumsum(depths)[:-1]])
    known[starts] = False  # no critique before round 1
    tokens = np.asarray([draw(st.integers(0, 500)) for _ in range(rows)], dtype=np.int64)
    contexts = [draw(st.sampled_from(CONTEXTS)) for _ in depths]
    return np.asarray(depths), drafts, emb, crit, known, tokens, contexts


def _pushed(case, b: int, verifier: str):
    depths, drafts, emb, crit, known, tokens, contexts = case
    lo = int(np.sum(depths[:b]))
    state = SignalState(contexts[b], verifier=verifier)
    for r in range(lo, lo + int(depths[b])):
        state.push(drafts[r], emb[r], crit[r] if known[r] else None, int(tokens[r]))
    return state.history


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return a is not None and b is not None and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b and type(a) is type(b)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trajectories(), st.sampled_from(["qa", "qa_marker", "has_paris"]))
def test_signal_columns_equal_signal_state_pushes(case, verifier) -> None:
    assert VERIFIERS["has_paris"]  # a verifier of the user's: called as it is, not recognised
    cols = SignalColumns(*case)
    for b in range(cols.B):
        got, want = cols.history(b, verifier), _pushed(case, b, verifier)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            for f in fields(w):
                assert _same(getattr(g, f.name), getattr(w, f.name)), (b, g.t, f.name)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trajectories(), st.data())
def test_run_columns_equals_the_round_by_round_engine(case, data) -> None:
    cols = SignalColumns(*case)
    for i in range(3):
        p = data.draw(family_policy(i))
        params, horizon = p.param_dict, p.halt.max_rounds
        got = run_columns(p.kind, params, cols, horizon=horizon)
        verifier = str(params.get("verifier", "qa"))
        for b in range(cols.B):
            cap = min(horizon, int(case[0][b]))
            want = run_signals(p.kind, params, _pushed(case, b, verifier), cap=cap, horizon=horizon)
            have = (int(got.stop_round[b]), got.reason[b], int(got.selected[b]), bool(got.verified_final[b]))
            assert have == want, (p.name, b)


def _replay(root: str, pols) -> list[tuple]:
    con = analysis.connect(root, policies=pols)
    try:
        return con.execute("SELECT * FROM family_replay ORDER BY policy, gen_id, scenario_id").fetchall()
    finally:
        con.close()


def test_a_store_out_of_trajectory_order_is_read_sorted_and_replays_the_same(tmp_path, monkeypatch) -> None:
    from shp_ray.policy.table import family_policies

    trajs = [
        (f"s{i}", [TEXTS[(i + t) % len(TEXTS)] for t in range(4)], ["Add the country.", "APPROVED", "Be shorter.", ""],
         [(10 + t, 5) for t in range(4)], [0.2, 0.5, 0.5, 0.9], CONTEXTS[i % len(CONTEXTS)],
         [["paris", "rome", None][(i + t) % 3 // 2] for t in range(4)], [[-0.05 * (i + t)] for t in range(4)])
        for i in range(6)
    ]  # fmt: skip
    encode = make_encoder(0.01)
    in_order, shuffled = tmp_path / "in_order", tmp_path / "shuffled"
    write_store(str(in_order), trajs, encode)
    write_store(str(shuffled), trajs, encode)
    store = Store(str(shuffled))
    rounds = store.read("rounds")
    for part in store.parts("rounds"):
        os.remove(part)
    perm = np.random.default_rng(0).permutation(rounds.num_rows)  # rounds of every trajectory interleaved
    store.write("rounds", rounds.take(pa.array(perm)), rounds_schema(DIM))
    calls = []
    real = family_stream.trajectories

    def spy(con, dim, *, sorted_=False):
        calls.append(sorted_)
        return real(con, dim, sorted_=sorted_)

    monkeypatch.setattr(family_stream, "trajectories", spy)
    pols = family_policies()
    expected = _replay(str(in_order), pols)
    assert calls == [False]  # the store's own order was fine
    calls.clear()
    assert _replay(str(shuffled), pols) == expected
    assert calls == [False, True]  # checked, found interleaved, read sorted
    assert len(expected) == len(pols) * len(trajs)


@pytest.mark.parametrize("depths", [[1], [1, 1, 1], [6, 1, 3]])
def test_single_round_trajectories(depths) -> None:
    rows = sum(depths)
    rng = np.random.default_rng(1)
    emb, crit = rng.normal(size=(rows, DIM)).astype(np.float32), np.zeros((rows, DIM), np.float32)
    known, tokens = np.zeros(rows, bool), np.ones(rows, np.int64)
    case = (np.asarray(depths), ["Paris"] * rows, emb, crit, known, tokens, [()] * len(depths))
    cols = SignalColumns(*case)
    for b in range(cols.B):
        assert [s.t for s in cols.history(b)] == [s.t for s in _pushed(case, b, "qa")]
