"""What opening a store computes once per part set (analysis.derived): replay_inputs and facts, kept, read back."""

from __future__ import annotations

import json
import logging

import pyarrow as pa
import pytest

import analysis
import analysis.derived as derived
from analysis.db import AnalysisError, setup_of
from storage.parts import Store
from storage.schemas import METRIC_COLUMNS
from storage.synthetic import SyntheticSpec, write_synthetic_store

REPLAY = "SELECT * FROM replay ORDER BY policy, gen_id, scenario_id"
INPUTS = "SELECT * FROM replay_inputs ORDER BY gen_id, scenario_id"


def _open(root, **kw):
    con = analysis.connect(root, **kw)
    try:
        return setup_of(con).inputs, con.sql(REPLAY).fetchall(), con.sql(INPUTS).fetchall()
    finally:
        con.close()


def _kept(root) -> list[str]:
    folder = root / "_cache" / derived.DIRNAME
    return sorted(p.name for p in folder.glob("replay_inputs-*.duckdb")) if folder.is_dir() else []


@pytest.fixture
def store(tmp_path):
    write_synthetic_store(tmp_path, SyntheticSpec(n_trajectories=8, rounds=4, seed=3))
    return tmp_path


def test_a_second_connection_reads_back_exactly_what_the_first_built(store) -> None:
    built = _open(store)
    assert built[0] == "built" and len(_kept(store)) == 1
    again = _open(store)
    assert again[0] == "stored"
    assert again[1:] == built[1:]  # every replay row and every input, value for value
    assert _open(store, materialize=False)[1] == built[1]  # and what the views compute without any table
    con, other = analysis.connect(store), analysis.connect(store)  # one file, attached read-only by both at once
    assert con.sql(REPLAY).fetchall() == other.sql(REPLAY).fetchall() == built[1]
    other.close()
    kinds = con.sql("SELECT column_name, column_type FROM (DESCRIBE replay_inputs)").fetchall()
    fresh = analysis.connect(store, weights={"faithfulness": 1.0})  # another key: built now
    assert setup_of(fresh).inputs == "built"
    assert fresh.sql("SELECT column_name, column_type FROM (DESCRIBE replay_inputs)").fetchall() == kinds


def test_a_new_part_or_another_judge_or_scope_is_another_key(store) -> None:
    first = _open(store)
    assert _open(store)[0] == "stored"
    assert _open(store, gen_id="synthetic-gen")[0] == "built"  # a scope: its own file
    # one more judgment, of one draft by the same judge, scoring it 0: its trajectory's IS changes
    st = Store(store)
    row = st.read("judgments").slice(0, 1)
    t = row.set_column(row.schema.get_field_index("judge_key"), "judge_key", pa.array(["0" * 64]))
    for m in METRIC_COLUMNS:
        t = t.set_column(t.schema.get_field_index(m), m, pa.array([0.0], pa.float64()))
    st.write("judgments", t)
    after = _open(store)
    assert after[0] == "built" and after[2] != first[2]  # the new part's rows, not the kept file's
    assert _open(store)[0] == "stored" and _open(store)[2] == after[2]


def test_facts_are_kept_but_a_store_that_fails_its_check_fails_every_time(store) -> None:
    _open(store)
    (facts,) = (store / "_cache" / derived.DIRNAME).glob("facts-*.json")
    kept = json.loads(facts.read_text())
    assert kept["rounds"] == 4 and kept["signals"] == "computed" and kept["dim"] == 384
    # a round written twice, with another latency: the check refuses the store, nothing is remembered for the new
    # part set (written twice with the same values, it would be read once: analysis.uniqueness)
    st = Store(store)
    row = st.read("rounds").slice(0, 1)
    st.write("rounds", row.set_column(row.schema.get_field_index("writer_latency_s"), "writer_latency_s", [[99.0]]))
    for _ in range(2):
        with pytest.raises(AnalysisError, match="with different values"):
            analysis.connect(store)
    assert len(list((store / "_cache" / derived.DIRNAME).glob("facts-*.json"))) == 1


def test_a_store_whose_cache_folder_cannot_be_written_opens_as_before(store, caplog) -> None:
    (store / "_cache").mkdir(exist_ok=True)
    (store / "_cache" / derived.DIRNAME).write_text("not a folder")  # mkdir fails, whoever runs the test
    derived._warned.clear()
    with caplog.at_level(logging.WARNING, logger="analysis.derived"):
        first, second = _open(store), _open(store)
    assert first[0] == second[0] == "built" and first[1:] == second[1:]
    assert sum("cannot keep what opening" in r.getMessage() for r in caplog.records) == 1  # said once
    assert list((store / "_cache").glob("_tmp-*")) == []


def test_parts_arriving_while_it_builds_keep_nothing(store, monkeypatch) -> None:
    calls = iter([("a",), ("b",), ("b",), ("b",)])  # listed at connect, then changed when about to keep
    monkeypatch.setattr(derived, "listing", lambda _store: next(calls))
    monkeypatch.setattr(derived, "TEMP_GRACE_S", 0)  # so a file left behind would not hide as a live writer's
    built = _open(store)
    assert built[0] == "built" and built[1]  # this connection read what it computed ...
    assert _kept(store) == [] and list((store / "_cache" / derived.DIRNAME).glob("_tmp-*")) == []  # ... alone


def test_the_first_open_reads_the_file_it_computed_and_a_failed_computation_keeps_nothing(store, caplog) -> None:
    con = analysis.connect(store)
    try:
        assert setup_of(con).inputs == "built"
        (path,) = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = 'kept_inputs'").fetchone()
        assert [path.rsplit("/", 1)[1]] == _kept(store)  # computed straight into the kept file, read there
    finally:
        con.close()
    cache = derived.DerivedCache(Store(store))
    con = analysis.db._new_connection()
    try:
        with caplog.at_level(logging.WARNING, logger="analysis.derived"):
            assert cache.build_inputs(con, "k" * 32, "SELECT error('not a replay input') AS x") is False
        assert not caplog.records  # the caller's own build raises the computation's error: no warning here
        attached = con.execute("SELECT database_name FROM duckdb_databases() WHERE path IS NOT NULL").fetchall()
        assert attached == []  # the half-written file's attachment is gone with it
    finally:
        con.close()
    assert list(cache.dir.glob(f"*{'k' * 32}*")) == [] and list(cache.dir.glob("_tmp-*")) == []


def test_a_kept_file_removed_under_a_connection_is_built_again(store, monkeypatch) -> None:
    built = _open(store)
    gone = store / "_cache" / derived.DIRNAME / "replay_inputs-gone.duckdb"
    monkeypatch.setattr(derived.DerivedCache, "inputs", lambda self, key: gone)
    again = _open(store)
    assert again[0] == "built" and again[1:] == built[1:]


def test_only_the_most_recently_used_files_are_kept(store, monkeypatch) -> None:
    monkeypatch.setattr(derived, "KEEP_FILES", 2)
    weights = [{"faithfulness": 1.0}, {"answer_relevancy": 1.0}, None]
    for w in weights:
        _open(store, weights=w)
    assert len(_kept(store)) == 2
    assert _open(store)[0] == "stored"  # the last one opened is kept
    assert _open(store, weights=weights[0])[0] == "built"  # the oldest was removed
