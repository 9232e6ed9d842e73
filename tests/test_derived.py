"""What opening a store computes once per part set (analysis.replay.derived): replay_inputs and facts, kept, read
back."""

from __future__ import annotations

import json
import logging
import os

import duckdb
import pyarrow as pa
import pytest

import analysis
import analysis.replay.derived as derived
from analysis.query import main as shp_query
from analysis.replay.db import AnalysisError, setup_of
from storage.kept import CONSTANTS_DIRNAME
from storage.parts import Store
from storage.schemas import METRIC_COLUMNS
from storage.synthetic import SyntheticSpec, write_synthetic_store
from storage.user_cache import cache_root, reader_dir

REPLAY = "SELECT * FROM replay ORDER BY policy, gen_id, scenario_id"
INPUTS = "SELECT * FROM replay_inputs ORDER BY gen_id, scenario_id"


def _open(root, materialize=True, **scope):
    con = analysis.connect(analysis.ReplayScope(root, **scope), materialize=materialize)
    try:
        return setup_of(con).inputs, con.sql(REPLAY).fetchall(), con.sql(INPUTS).fetchall()
    finally:
        con.close()


def _folder(root):
    """Where the files derived from the store at ``root`` are kept: this machine's folder for it, not the store."""
    return reader_dir(Store(root)) / derived.DIRNAME


def _kept(root) -> list[str]:
    folder = _folder(root)
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
    (facts,) = _folder(store).glob("facts-*.json")
    kept = json.loads(facts.read_text())["payload"]
    assert kept["rounds"] == 4 and kept["signals"] == "computed" and kept["dim"] == 384
    # a round written twice, with another latency: the check refuses the store, nothing is remembered for the new
    # part set (written twice with the same values, it would be read once: analysis.replay.uniqueness)
    st = Store(store)
    row = st.read("rounds").slice(0, 1)
    st.write("rounds", row.set_column(row.schema.get_field_index("writer_latency_s"), "writer_latency_s", [[99.0]]))
    for _ in range(2):
        with pytest.raises(AnalysisError, match="with different values"):
            analysis.connect(store)
    assert len(list(_folder(store).glob("facts-*.json"))) == 1


def test_a_store_whose_cache_folder_cannot_be_written_opens_as_before(store, caplog) -> None:
    _folder(store).parent.mkdir(parents=True, exist_ok=True)
    _folder(store).write_text("not a folder")  # mkdir fails, whoever runs the test
    derived._warned.clear()
    with caplog.at_level(logging.WARNING, logger="analysis.replay.derived"):
        first, second = _open(store), _open(store)
    assert first[0] == second[0] == "built" and first[1:] == second[1:]
    assert sum("cannot keep what opening" in r.getMessage() for r in caplog.records) == 1  # said once
    assert list(_folder(store).parent.glob("_tmp-*")) == []


def test_parts_arriving_while_it_builds_keep_nothing(store, monkeypatch) -> None:
    calls = iter([("a",), ("b",), ("b",), ("b",)])  # listed at connect, then changed when about to keep
    monkeypatch.setattr(derived, "listing", lambda _store: next(calls))
    monkeypatch.setattr(derived, "TEMP_GRACE_S", 0)  # so a file left behind would not hide as a live writer's
    built = _open(store)
    assert built[0] == "built" and built[1]  # this connection read what it computed ...
    assert _kept(store) == [] and list(_folder(store).glob("_tmp-*")) == []  # ... alone


def test_the_first_open_reads_the_file_it_computed_and_a_failed_computation_keeps_nothing(store, caplog) -> None:
    con = analysis.connect(store)
    try:
        assert setup_of(con).inputs == "built"
        (path,) = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = 'kept_inputs'").fetchone()
        assert [path.rsplit("/", 1)[1]] == _kept(store)  # computed straight into the kept file, read there
    finally:
        con.close()
    cache = derived.DerivedCache(Store(store))
    con = analysis.replay.db._new_connection()
    try:
        with caplog.at_level(logging.WARNING, logger="analysis.replay.derived"):
            assert cache.build_inputs(con, "k" * 32, "SELECT error('not a replay input') AS x") is False
        assert not caplog.records  # the caller's own build raises the computation's error: no warning here
        attached = con.execute("SELECT database_name FROM duckdb_databases() WHERE path IS NOT NULL").fetchall()
        assert attached == []  # the half-written file's attachment is gone with it
    finally:
        con.close()
    assert list(cache.dir.glob(f"*{'k' * 32}*")) == [] and list(cache.dir.glob("_tmp-*")) == []


def test_a_kept_file_removed_under_a_connection_is_built_again(store, monkeypatch) -> None:
    built = _open(store)
    gone = _folder(store) / "replay_inputs-gone.duckdb"
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


SUMMARY = "SELECT policy, mean_operational_tokens FROM policy_summary ORDER BY policy"


def _summary(root) -> list[tuple]:
    con = analysis.connect(root)
    try:
        return con.sql(SUMMARY).fetchall()
    finally:
        con.close()


def _verify(root, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = shp_query(["--store", str(root), "--verify", *extra])
    return code, capsys.readouterr().out


def _failed_checks(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "failed its check" in r.getMessage()]


def test_a_tampered_kept_inputs_file_is_named_discarded_and_built_again(store, capsys, caplog) -> None:
    """One value edited in the kept replay_inputs (any DuckDB client can): never read, said once, rebuilt."""
    right = _summary(store)
    (name,) = _kept(store)
    kept = _folder(store) / name
    with duckdb.connect(str(kept)) as con:  # every trajectory's loop tokens, as the probe did
        con.execute("UPDATE replay_inputs SET lt = list_transform(lt, lambda x: x + 250000)")
    code, out = _verify(store, capsys)
    assert code == 1 and f"DAMAGED {kept} [kept file]: keyed hash" in out
    with caplog.at_level(logging.WARNING):
        con = analysis.connect(store)
        try:
            assert setup_of(con).inputs == "built" and con.sql(SUMMARY).fetchall() == right
        finally:
            con.close()
        assert _summary(store) == right
    (said,) = _failed_checks(caplog)  # one line, once, naming the file
    assert str(kept) in said and "\n" not in said
    assert not kept.exists() and len(_kept(store)) == 1
    code, out = _verify(store, capsys, "--recheck")
    constants = len(list((cache_root() / CONSTANTS_DIRNAME).glob("*.json")))  # this machine's, checked too
    assert code == 0 and f"{2 + constants} kept files checked" in out and "0 damaged" in out


def test_a_tampered_facts_file_is_named_discarded_and_computed_again(store, capsys, caplog) -> None:
    right = _summary(store)
    (facts,) = _folder(store).glob("facts-*.json")
    kept = json.loads(facts.read_text())
    kept["payload"]["rounds"] = 2  # was 4: the deeper rounds' tokens would be NULL
    facts.write_text(json.dumps(kept))
    code, out = _verify(store, capsys)
    assert code == 1 and f"DAMAGED {facts} [kept file]: its keyed hash does not match" in out
    with caplog.at_level(logging.WARNING):
        assert _summary(store) == right
    (said,) = _failed_checks(caplog)
    assert str(facts) in said
    assert json.loads(facts.read_text())["payload"]["rounds"] == 4  # kept again, as computed
    assert _verify(store, capsys)[0] == 0


def test_a_kept_file_of_another_key_is_not_read(store, caplog) -> None:
    """A kept file renamed to another key (its bytes, so its checksum, intact) holds the key it was built for."""
    right = _summary(store)
    (mine,) = _kept(store)
    _open(store, weights={"faithfulness": 1.0})  # a second file, under another key
    (theirs,) = (n for n in _kept(store) if n != mine)
    (_folder(store) / mine).unlink()
    stem, checksum = mine.split(".", 1)[0], theirs.split(".", 1)[1]  # replay_inputs-<key>, sha256-<hash>.duckdb
    (_folder(store) / theirs).rename(_folder(store) / f"{stem}.{checksum}")
    with caplog.at_level(logging.WARNING):
        assert _summary(store) == right
    (said,) = _failed_checks(caplog)
    assert "holds the inputs of key" in said


def test_a_kept_file_is_hashed_once_per_size_mtime_and_inode(store, monkeypatch, capsys) -> None:
    """A later open believes a kept file its record says was hashed unchanged (a stat, no read); a changed mtime
    makes it hash the file again, as does --verify --recheck."""
    import storage.kept as kept

    _open(store)
    hashed: list[str] = []
    real = kept.digest_file
    monkeypatch.setattr(kept, "digest_file", lambda path: hashed.append(path.name) or real(path))
    assert _open(store)[0] == "stored" and hashed == []
    (name,) = _kept(store)
    os.utime(_folder(store) / name)  # touched: same bytes, another mtime
    assert _open(store)[0] == "stored" and hashed == [name]
    assert _open(store)[0] == "stored" and hashed == [name]  # recorded again
    assert _verify(store, capsys, "--recheck")[0] == 0 and hashed == [name, name]
