"""What a connection was opened with (analysis.setup_of) lives exactly as long as the connection."""

from __future__ import annotations

import gc
import weakref

import duckdb
import pytest

import analysis
import analysis.replay.db
from analysis.replay.db import AnalysisError, setup_of
from shp_ray.policy.table import standard_policies
from storage.synthetic import SyntheticSpec, write_synthetic_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    write_synthetic_store(root, SyntheticSpec(n_trajectories=4, rounds=3, seed=0))
    return root


def test_a_collected_connection_takes_its_setup_along(store) -> None:
    gc.collect()
    before = len(analysis.replay.db._SETUPS)
    con = analysis.connect(store, weights={"faithfulness": 1.0})
    assert setup_of(con).weights["faithfulness"] == 1.0
    assert len(analysis.replay.db._SETUPS) == before + 1
    gone = weakref.ref(con)
    con.close()
    del con
    gc.collect()
    assert gone() is None
    assert len(analysis.replay.db._SETUPS) == before  # nothing piles up

    # New connections have no setup, though one very likely sits at the old id() (CPython reuses the
    # address): an id()-keyed table would have handed it the collected connection's setup.
    fresh = [duckdb.connect() for _ in range(8)]
    try:
        for c in fresh:
            with pytest.raises(AnalysisError, match="not opened by analysis.connect"):
                setup_of(c)
    finally:
        for c in fresh:
            c.close()


def test_each_connection_has_its_own_setup_and_set_policies_updates_it(store) -> None:
    a = analysis.connect(store, weights={"faithfulness": 1.0})
    b = analysis.connect(store)
    try:
        assert setup_of(a).weights != setup_of(b).weights
        pols = standard_policies()[:2]
        analysis.set_policies(a, pols)
        assert setup_of(a).policies == tuple(pols)
        assert setup_of(b).policies != tuple(pols)
    finally:
        a.close()
        b.close()


def test_a_replay_scope_opens_what_its_keywords_open(store, tmp_path) -> None:
    """connect(ReplayScope(...)) is connect(store, judge=..., weights=..., policies=...) with the rest of the scope;
    the store becomes a Store once; a scope and loose keywords together are refused in one line."""
    pols = standard_policies()[:2]
    query = "SELECT policy, scenario_id, stop_round FROM replay ORDER BY ALL"
    by_keywords = analysis.connect(store, weights={"faithfulness": 1.0}, policies=pols)
    scope = analysis.ReplayScope(store, weights={"faithfulness": 1.0}, policies=pols, delta=0.05)
    by_scope = analysis.connect(scope)
    try:
        assert by_scope.sql(query).fetchall() == by_keywords.sql(query).fetchall() != []
        assert setup_of(by_scope).delta == 0.05 and setup_of(by_scope).policies == tuple(pols)
    finally:
        by_keywords.close()
        by_scope.close()
    assert isinstance(scope.store, analysis.replay.db.Store) and analysis.ReplayScope(scope.store).store is scope.store
    one = analysis.connect(analysis.ReplayScope(scope.store, scenario_ids=["syn-0000000"], policies=pols))
    try:
        assert one.sql("SELECT DISTINCT scenario_id FROM replay").fetchall() == [("syn-0000000",)]
    finally:
        one.close()
    with pytest.raises(AnalysisError, match="go in the ReplayScope"):
        analysis.connect(scope, judge="j")
    with pytest.raises(AnalysisError, match="no store at"):
        analysis.connect(analysis.ReplayScope(tmp_path / "nothing"))
