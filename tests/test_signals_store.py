"""The stored per-round signals: what the replay reads without one embedding, equal to the rounds they
come from, and a store is replayed the same whether its trajectories have them, lack them, or some of each."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import analysis
from analysis.query import main as query_main
from analysis.replay import signals_store
from shp_ray.policy.round_signals import SIGNALS_VERSION, RoundColumns, trajectory_signals
from shp_ray.policy.scoring import cosine_distance
from storage.parts import Store
from storage.schemas import SIGNALS
from storage.synthetic import SyntheticSpec, write_synthetic_store

pytestmark = pytest.mark.integration

REPLAY = (
    "SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, final_is, "
    "final_has_answer_line, final_em, final_f1 FROM replay ORDER BY ALL"
)
ROUNDS = (
    "SELECT gen_id, scenario_id, round, distance, approved, writer_tokens, critic_tokens, has_answer_line, answer_em "
    "FROM round_signals ORDER BY gen_id, scenario_id, round"
)


def _synthetic(root, **kw) -> Store:
    return write_synthetic_store(root, SyntheticSpec(**{"n_trajectories": 120, "ragged": True, "seed": 3, **kw}))


def _open(root):  # noqa: ANN202
    con = analysis.connect(root)
    try:
        return analysis.setup_of(con).signals, con.sql(REPLAY).fetchall(), con.sql(ROUNDS).fetchall()
    finally:
        con.close()


def _same_rounds(a: list[tuple], b: list[tuple]) -> None:
    """Stored d_t is float64 of the float32 embeddings; DuckDB's own cosine is float32: equal to ~1e-6."""
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x[:3] == y[:3] and x[4:] == y[4:]
        assert (x[3] is None and y[3] is None) or x[3] == pytest.approx(y[3], abs=1e-6)


def test_stored_and_computed_signals_replay_the_same(tmp_path) -> None:
    root = tmp_path / "store"
    _synthetic(root)
    kind, computed, rounds_computed = _open(root)
    assert kind == "computed" and len(computed) == 120 * 15

    report = signals_store.build(Store(root))
    assert (report.trajectories, report.built) == (120, 120)
    assert report.rows_written == len(rounds_computed)
    kind, stored, rounds_stored = _open(root)
    assert kind == "stored"
    assert stored == computed  # every policy's stop round, reason, tokens, IS and answer metrics
    _same_rounds(rounds_stored, rounds_computed)
    assert sum(r[4] for r in rounds_stored) > 0  # the synthetic critic approves sometimes

    again = signals_store.build(Store(root))  # nothing missing: nothing written
    assert (again.built, again.rows_written) == (0, 0)
    checked = signals_store.check(Store(root))
    assert (checked.checked_rows, checked.different_rows, checked.unstored) == (len(rounds_stored), 0, 0)


def test_stored_distances_are_the_live_stoppers_bit_for_bit(tmp_path) -> None:
    root = tmp_path / "store"
    store = _synthetic(root, n_trajectories=30)
    signals_store.build(Store(root))
    rounds = store.read("rounds").sort_by([("scenario_id", "ascending"), ("round", "ascending")])
    sig = store.read("signals").sort_by([("scenario_id", "ascending"), ("round", "ascending")])
    emb = np.stack(rounds["embedding"].to_numpy(zero_copy_only=False))
    sid, rnd = rounds["scenario_id"].to_pylist(), rounds["round"].to_pylist()
    assert sig["scenario_id"].to_pylist() == sid and sig["round"].to_pylist() == rnd
    for i, d in enumerate(sig["distance"].to_pylist()):
        assert (d is None) == (rnd[i] == 1)
        if d is not None:
            assert d == cosine_distance(emb[i], emb[i - 1])  # exact: one function for both


def test_trajectories_without_signals_are_computed_and_named(tmp_path, caplog) -> None:
    root = tmp_path / "store"
    _synthetic(root)
    signals_store.build(Store(root))
    # A second generation's rounds, written before the signals table existed (unjudged here: its judge keys
    # would collide with the first generation's, which a real judge cache never lets happen).
    other = tmp_path / "other"
    _synthetic(other, gen_id="second-gen", seed=4, n_trajectories=7)
    for table in ("rounds", "generations"):
        for part in (other / table).rglob("part-*.parquet"):
            dest = root / part.relative_to(other)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(part, dest)
    plain = tmp_path / "plain"
    shutil.copytree(root, plain)
    shutil.rmtree(plain / "signals")
    _, reference, rounds_reference = _open(plain)

    with caplog.at_level(logging.WARNING, logger="analysis.replay.db"):
        kind, mixed, rounds_mixed = _open(root)
    assert kind == "mixed" and mixed == reference
    _same_rounds(rounds_mixed, rounds_reference)
    assert "7 trajectories" in caplog.text and f"shp-query --store {root.resolve()} --signals rebuild" in caplog.text

    assert query_main(["--store", str(root), "--signals", "rebuild"]) == 0
    kind, rebuilt, _ = _open(root)
    assert kind == "stored" and rebuilt == reference


def test_duplicated_and_stale_signals_are_never_counted_twice_or_believed(tmp_path) -> None:
    root = tmp_path / "store"
    store = _synthetic(root, n_trajectories=40)
    _, reference, _ = _open(root)
    signals_store.build(Store(root))
    signals_store.build(Store(root), missing_only=False)  # two writers raced: identical copies
    kind, twice, _ = _open(root)
    assert kind == "stored" and twice == reference  # each copy read once (analysis.replay.uniqueness): all stored

    stale = tmp_path / "stale"
    _synthetic(stale, n_trajectories=40)
    good = next(iter(signals_store._computed(Store(stale), None)))[0]
    wrong = good.set_column(good.schema.get_field_index("distance"), "distance", pa.array([0.0] * good.num_rows))
    wrong = wrong.set_column(wrong.schema.get_field_index("approved"), "approved", pa.array([True] * good.num_rows))
    old = wrong.set_column(wrong.schema.get_field_index("signals_version"), "signals_version",
                           pa.array(["signals-v0"] * good.num_rows))  # fmt: skip
    Store(stale).write("signals", old)
    kind, replayed, _ = _open(stale)
    assert kind == "mixed" and replayed == reference  # another version's numbers are recomputed, not read
    assert store.parts("signals")


def test_check_finds_a_stored_value_its_rounds_do_not_give(tmp_path, capsys) -> None:
    root = tmp_path / "store"
    store = _synthetic(root, n_trajectories=20)
    good = next(iter(signals_store._computed(store, None)))[0]
    first = good.slice(0, 2)
    bad = first.set_column(first.schema.get_field_index("distance"), "distance", pa.array([None, 1.5]))
    store.write("signals", pa.concat_tables([bad, good.slice(2)]))
    assert query_main(["--store", str(root), "--signals", "check"]) == 1
    out, err = capsys.readouterr()
    line = json.loads(out.strip().splitlines()[-1])
    assert line["different_rows"] == 1 and line["checked_rows"] == good.num_rows
    assert "differ from their rounds" in err and "round 2" in err


def test_signals_need_whole_trajectories_in_round_order() -> None:
    def cols(rounds: list[int]) -> dict[str, object]:
        n = len(rounds)
        columns = RoundColumns(
            gen_id=["g"] * n, scenario_id=["s"] * n, round=rounds, draft=["Answer: x"] * n,
            feedback=["APPROVED"] * n, draft_hash=["h"] * n, writer_tokens=[1] * n, critic_tokens=[2] * n,
        )  # fmt: skip
        return trajectory_signals(columns, np.eye(n, 4, dtype=np.float32), gold={"s": "x"}, embedder={"g": "e"})

    ok = cols([1, 2, 3])
    assert ok["distance"][0] is None and ok["distance"][1] == pytest.approx(1.0)
    assert ok["approved"] == [True] * 3 and ok["answer_em"] == [1.0] * 3 and ok["signals_version"][0] == SIGNALS_VERSION
    assert pa.table(ok, schema=SIGNALS).num_rows == 3
    with pytest.raises(ValueError, match="scenario_id='s' has round 3 where round 2 was expected"):
        cols([1, 3])
    with pytest.raises(ValueError, match="has round 2 where round 1 was expected"):
        cols([2, 3])


def test_a_generated_trajectory_carries_its_signals(tmp_path) -> None:
    """The generation's rows (records.trajectory_rows) hold the signals a rebuild would compute."""
    root = tmp_path / "store"
    store = _synthetic(root, n_trajectories=10)
    from shp_ray.generation.records import signal_rows

    rounds = store.read("rounds").sort_by([("scenario_id", "ascending"), ("round", "ascending")]).to_pylist()
    gold = dict(
        zip(*store.read("scenarios", columns=["scenario_id", "ground_truth"]).to_pydict().values(), strict=True)
    )
    rows = signal_rows(rounds, gold, {"synthetic-gen": "synthetic random walk (no encoder)"})
    rebuilt = next(iter(signals_store._computed(store, None)))[0].to_pylist()
    assert rows == rebuilt
    assert pc.sum(pa.array([r["approved"] for r in rows])).as_py() >= 0


def test_signals_whose_rounds_are_gone_are_never_replayed(tmp_path) -> None:
    """A quarantined rounds part takes its trajectories out of the replay, though their signals stay."""
    root = tmp_path / "store"
    _synthetic(root, n_trajectories=30)
    _synthetic(root, n_trajectories=5, gen_id="second-gen", seed=9)
    signals_store.build(Store(root))
    kept = tmp_path / "kept"
    _synthetic(kept, n_trajectories=30)
    signals_store.build(Store(kept))
    _, reference, _ = _open(kept)
    shutil.rmtree(root / "rounds" / "gen_id=second-gen")  # e.g. moved to _quarantine/
    kind, replayed, rounds = _open(root)
    assert kind == "mixed" and replayed == reference
    assert {r[0] for r in rounds} == {"synthetic-gen"}


def test_one_generation_opens_only_its_folder_and_slices_partition_the_store(tmp_path) -> None:
    root = tmp_path / "store"
    _synthetic(root, n_trajectories=40)
    _synthetic(root, n_trajectories=12, gen_id="second-gen", seed=9)
    signals_store.build(Store(root))
    assert sorted(p.name for p in (root / "rounds").iterdir()) == ["gen_id=second-gen", "gen_id=synthetic-gen"]
    con = analysis.connect(root)
    everything = con.sql(REPLAY).fetchall()
    con.close()

    one = analysis.connect(analysis.ReplayScope(root, gen_id="second-gen"))
    sources = " ".join(r[0] for r in one.sql("SELECT sql FROM duckdb_views() WHERE view_name IN "
                                            "('round_parts', 'signals_raw')").fetchall())  # fmt: skip
    assert "gen_id=second-gen" in sources and "gen_id=synthetic-gen" not in sources and "gen_id=*" not in sources
    assert one.sql(REPLAY).fetchall() == [r for r in everything if r[1] == "second-gen"]
    one.close()

    sliced = []
    for i in range(3):
        part = analysis.connect(analysis.ReplayScope(root, scenario_ids=analysis.ScenarioSlice(i, 3)))
        sliced += part.sql(REPLAY).fetchall()
        part.close()
    assert sorted(sliced) == sorted(everything)  # every trajectory in exactly one slice
    with pytest.raises(ValueError, match="0 <= index < count"):
        analysis.ScenarioSlice(3, 3)
