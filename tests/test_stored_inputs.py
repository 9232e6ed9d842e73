"""Each trajectory's replay inputs, written with its signals (storage.trajectory_inputs): a store opens from them
with the same replay as from its parts, and only while the parts they name are there (analysis.replay.stored_inputs)."""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

import analysis
from analysis.replay import signals_store
from analysis.replay.db import setup_of
from shp_ray.generation.records import signal_rows
from storage.kept import DERIVED_DIRNAME
from storage.parts import Store
from storage.schemas import JUDGMENTS, METRIC_COLUMNS
from storage.synthetic import SyntheticSpec, write_synthetic_store
from storage.trajectory_inputs import TABLE
from storage.user_cache import reader_dir
from storage.writer import StoreWriter

REPLAY = "SELECT * FROM replay ORDER BY policy, gen_id, scenario_id"
INPUTS = "SELECT * FROM replay_inputs ORDER BY gen_id, scenario_id"
SPEC = SyntheticSpec(n_trajectories=40, rounds=5, seed=7, chunk=15, ragged=True, batch_rate=0.2, nan_metric_rate=0.1)


def _open(root: Path, **scope) -> tuple[str, list, list]:
    con = analysis.connect(analysis.ReplayScope(root, **scope))
    try:
        return setup_of(con).inputs, con.sql(REPLAY).fetchall(), con.sql(INPUTS).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inputs") / "store"
    write_synthetic_store(root, SPEC)
    assert signals_store.build(Store(root)).inputs_parts == 3  # one per rounds part, as a generation writes them
    return root


@pytest.fixture
def pair(written, tmp_path) -> tuple[Path, Path]:
    """The store, and the same parts without its trajectory_inputs (what an older writer left)."""
    with_inputs, without = tmp_path / "with", tmp_path / "without"
    shutil.copytree(written, with_inputs, ignore=shutil.ignore_patterns("_cache"))
    shutil.copytree(written, without, ignore=shutil.ignore_patterns("_cache", TABLE))
    return with_inputs, without


@pytest.mark.parametrize(
    "scope",
    [{}, {"weights": {"faithfulness": 0.6, "context_recall": 0.4}}, {"gen_id": "synthetic-gen"},
     {"scenario_ids": analysis.ScenarioSlice(1, 3)}],
    ids=["all", "weights", "gen_id", "slice"],
)  # fmt: skip
def test_a_store_opens_from_its_written_inputs_with_the_replay_of_its_parts(pair, scope) -> None:
    first, computed = _open(pair[0], **scope), _open(pair[1], **scope)
    assert (first[0], computed[0]) == ("written", "built")
    assert first[1:] == computed[1:] and first[1]  # every replay row and every input, value for value
    later = _open(pair[0], **scope)
    assert later[0] == "written" and later[1:] == first[1:]  # read in place again: the facts kept, no inputs file
    kept = {p.name.split("-", 1)[0] for p in (reader_dir(Store(pair[0])) / DERIVED_DIRNAME).iterdir()}
    assert kept == {"facts"}, kept
    assert {p.name.split("-", 1)[0] for p in (reader_dir(Store(pair[1])) / DERIVED_DIRNAME).iterdir()} >= {
        "replay_inputs"
    }  # the store without the rows keeps what its open computed


def _move_out(root: Path, table: str) -> None:
    """Move the first part of ``table`` out of the store (as a quarantine does)."""
    part = Path(Store(root).parts(table)[0])
    part.rename(root.parent / f"moved-{table}-{part.name}")


@pytest.mark.parametrize("table", ["signals", "rounds", "judgments"])
def test_rows_naming_a_part_that_is_gone_are_not_believed(pair, table) -> None:
    for root in pair:
        _move_out(root, table)
    got, expected = _open(pair[0]), _open(pair[1])
    assert got[0] == "built" and got[1:] == expected[1:]


def test_a_part_no_row_accounts_for_or_a_draft_judged_twice_is_computed_from_the_parts(pair) -> None:
    st = [Store(root) for root in pair]
    extra = st[0].read("judgments").slice(0, 1)  # the same draft judged again by the same judge, another key
    extra = extra.set_column(extra.schema.get_field_index("judge_key"), "judge_key", pa.array(["0" * 64]))
    for m in METRIC_COLUMNS:
        extra = extra.set_column(extra.schema.get_field_index(m), m, pa.array([0.0], pa.float64()))
    for s in st:
        s.write("judgments", extra)
    got, expected = _open(pair[0]), _open(pair[1])
    assert got[0] == "built" and got[1:] == expected[1:]  # the pick decides that round's IS, as from the parts


def test_a_trajectory_written_without_inputs_sends_the_store_back_to_its_parts(pair, tmp_path) -> None:
    more = tmp_path / "more"
    write_synthetic_store(more, SyntheticSpec(n_trajectories=3, rounds=2, seed=99, gen_id="other-gen"))
    signals_store.build(Store(more))
    for root in pair:
        for table in ("rounds", "signals", "judgments", "scenarios", "generations"):
            for i, part in enumerate(Store(more).parts(table)):
                dest = root / Path(part).relative_to(more)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(part, dest.with_name(f"more{i}-{dest.name}"))  # a copy under another name
    got, expected = _open(pair[0]), _open(pair[1])
    assert got[0] == "built" and got[1:] == expected[1:]


def test_opening_writes_nothing_into_the_store(pair) -> None:
    before = sorted(p for p in pair[0].rglob("*"))
    _open(pair[0])
    _open(pair[0])
    assert sorted(p for p in pair[0].rglob("*")) == before


def _trajectories(source: Store) -> tuple[list[dict], list[dict]]:
    """The synthetic store's trajectories as the generation's writer gets them (records.trajectory_rows)."""
    gold = dict(
        zip(*source.read("scenarios", columns=["scenario_id", "ground_truth"]).to_pydict().values(), strict=True)
    )
    embedder = {"synthetic-gen": source.read("generations")["embedder"][0].as_py()}
    scenarios = {r["scenario_id"]: r for r in source.read("scenarios").to_pylist()}
    by_draft = {(r["scenario_id"], r["draft_hash"]): r for r in source.read("judgments").to_pylist()}
    rounds: dict[str, list[dict]] = defaultdict(list)
    for r in source.read("rounds").sort_by([("scenario_id", "ascending"), ("round", "ascending")]).to_pylist():
        rounds[r["scenario_id"]].append(r)
    out = []
    for sid, rows in rounds.items():
        judged = [by_draft[(sid, r["draft_hash"])] for r in rows if (sid, r["draft_hash"]) in by_draft]
        out.append(
            {
                "scenarios": [scenarios[sid]],
                "rounds": rows,
                "signals": signal_rows(rows, gold, embedder),
                "judgments": judged,
            }
        )
    return out, source.read("generations").to_pylist()


def test_the_generation_writer_writes_each_trajectorys_inputs_with_its_signals(written, tmp_path) -> None:
    trajectories, generations = _trajectories(Store(written))
    roots = [tmp_path / "gen", tmp_path / "gen-without"]
    for root in roots:
        writer = StoreWriter(Store(root), SPEC.dim, flush_every=6)
        writer.add("generations", generations)
        if root == roots[1]:
            writer._write_inputs = lambda tables, paths: 0  # an older writer: no trajectory_inputs
        for rows in trajectories[:-1]:
            writer.add_trajectory(rows)
        writer.flush()
    assert len(Store(roots[0]).read(TABLE)) == len(trajectories) - 1
    got, expected = _open(roots[0]), _open(roots[1])
    assert (got[0], expected[0]) == ("written", "built") and got[1:] == expected[1:]
    # the last trajectory's drafts judged before it was written (a rerun after a kill): its rows are left out
    last = trajectories[-1]
    for root in roots:
        Store(root).write("judgments", pa.Table.from_pylist(last["judgments"], schema=JUDGMENTS))
        writer = StoreWriter(Store(root), SPEC.dim)  # loads the judged keys: writes no verdict of it again
        writer.add_trajectory(last)
        writer.flush()
    assert len(Store(roots[0]).read(TABLE)) == len(trajectories) - 1
    got, expected = _open(roots[0]), _open(roots[1])
    assert got[0] == "built" and got[1:] == expected[1:]
