"""Each row of the store once: a second part that contradicts the first is refused naming both, a retried write
(identical copies) is read once -- for rounds, judgments and the stored signals, through analysis.connect and
shp-query, on a first open and on the later ones that read the kept facts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import analysis
from analysis.query import main
from analysis.replay import signals_store
from analysis.replay.db import AnalysisError
from storage.parts import Store
from storage.schemas import METRIC_COLUMNS
from storage.synthetic import SyntheticSpec, write_synthetic_store

SUMMARY = "SELECT policy, n, mean_is, mean_rounds, mean_operational_tokens FROM policy_summary ORDER BY policy"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[Path, list[tuple]]:
    root = tmp_path_factory.mktemp("unique") / "store"
    write_synthetic_store(root, SyntheticSpec(n_trajectories=24, rounds=4, seed=11))
    signals_store.build(Store(root))  # as a generation writes them
    return root, _summary(root)


@pytest.fixture
def store(base, tmp_path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(base[0], root, ignore=shutil.ignore_patterns("_cache"))
    return root


def _summary(root: Path) -> list[tuple]:
    con = analysis.connect(root)
    try:
        return con.sql(SUMMARY).fetchall()
    finally:
        con.close()


def _same(got: list[tuple], expected: list[tuple]) -> None:
    """The same numbers (an average over another row order may differ in its last bit)."""
    assert [r[0] for r in got] == [r[0] for r in expected]
    for a, b in zip(got, expected, strict=True):
        assert a[1:] == pytest.approx(b[1:], rel=1e-12, nan_ok=True)


def _view(root: Path, view: str, query: str = "SELECT 1") -> tuple[str, list[tuple]]:
    """The SQL of ``view`` in a connection to ``root``, and what ``query`` gives there."""
    con = analysis.connect(root)
    try:
        ((text,),) = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = ?", [view]).fetchall()
        return text, con.sql(query).fetchall()
    finally:
        con.close()


def _with(table: pa.Table, column: str, value: object) -> pa.Table:
    field = table.schema.field(column)
    return table.set_column(table.schema.get_field_index(column), field, pa.array([value] * table.num_rows, field.type))


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _refused(root: Path, table: str, parts: list[str], capsys) -> None:
    """connect() and shp-query both refuse, naming every part; and again on the next open (nothing kept)."""
    for _ in range(2):
        with pytest.raises(AnalysisError, match=f"{table} .* with different values") as err:
            analysis.connect(root)
        assert all(_name(p) in str(err.value) for p in parts), str(err.value)
    assert main(["--store", str(root), "SELECT count(*) FROM replay"]) == 2
    out, text = capsys.readouterr()
    assert out == "" and len(text.strip().splitlines()) == 1 and all(_name(p) in text for p in parts)


def test_a_judgments_part_contradicting_another_is_refused_naming_both(store, capsys) -> None:
    st = Store(store)
    (first,) = st.parts("judgments")
    zeros = st.read("judgments")
    for m in METRIC_COLUMNS:
        zeros = _with(zeros, m, 0.0)  # valid values, the same keys: every mean_is would change
    second = st.write("judgments", zeros)
    _refused(store, "judgments", [first, second], capsys)


def test_an_identical_judgments_part_is_read_once(base, store) -> None:
    st = Store(store)
    copy = st.read("judgments")
    again = st.write("judgments", copy.slice(0, copy.num_rows // 2))  # a retried write of some of the rows
    assert len(st.parts("judgments")) == 2
    _same(_summary(store), base[1])
    _same(_summary(store), base[1])  # a later open, from the kept facts
    text = _view(store, "judgments_raw")[0]
    assert _name(again) not in text and "QUALIFY" not in text  # the copy is left out: nothing to read once


def test_a_part_holding_copies_and_new_rows_is_read_with_each_key_once(base, store) -> None:
    st = Store(store)
    judgments = st.read("judgments")
    other = _with(
        judgments.slice(1, 1), "judge_key", "f" * 64
    )  # another request about a draft: the pick keeps the first
    st.write("judgments", pa.concat_tables([judgments.slice(0, 3), other]))  # 3 copies, 1 new row: read, each once
    _same(_summary(store), base[1])
    assert _view(store, "judgments_raw", "SELECT count(*) FROM judgments_raw")[1] == [(judgments.num_rows + 1,)]
    assert "QUALIFY" in _view(store, "judgments_raw")[0]  # each key once, by a window over the table


def test_a_rounds_part_contradicting_another_is_refused_naming_both(store, capsys) -> None:
    st = Store(store)
    (first,) = st.parts("rounds")
    row = st.read("rounds").slice(0, 1)
    second = st.write("rounds", _with(row, "writer_completion_tokens", row["writer_completion_tokens"][0].as_py() + 1))
    _refused(store, "rounds", [first, second], capsys)


def test_an_identical_rounds_part_is_read_once(base, store) -> None:
    st = Store(store)
    again = st.write("rounds", st.read("rounds").slice(0, 5))  # rows already stored, again
    _same(_summary(store), base[1])
    _same(_summary(store), base[1])
    text = _view(store, "round_parts")[0]
    assert _name(again) not in text and "QUALIFY" not in text


def test_a_signals_part_contradicting_another_is_refused_naming_both(store, capsys) -> None:
    st = Store(store)
    (first,) = st.parts("signals")
    signals = st.read("signals")
    row = signals.filter(pc.equal(signals["round"], 2)).slice(0, 1)
    second = st.write("signals", _with(row, "distance", 1.5))
    _refused(store, "signals", [first, second], capsys)


def test_signals_regenerated_with_float_noise_in_d_t_are_one_row(base, store) -> None:
    # A lost trajectory generated again beside its surviving signals: the embedding model's float32 rounding
    # depends on the micro-batch, so d_t may differ in its last bits; that is the same row, not a contradiction.
    st = Store(store)
    signals = st.read("signals")
    rows = signals.filter(pc.equal(signals["round"], 2)).slice(0, 2)
    noisy = pc.add(rows["distance"], pa.scalar(2e-7))
    again = st.write("signals", rows.set_column(rows.schema.get_field_index("distance"), "distance", noisy))
    _same(_summary(store), base[1])
    assert _name(again) not in _view(store, "signals_raw")[0]  # nothing but copies: left out


def test_two_epochs_that_wrote_the_same_draft_each_keep_their_judgment(store) -> None:
    """The same request (one judge_key: task, draft) judged for two scenarios -- two epochs of a task that wrote
    the same draft -- is two rows, one per scenario, each joined to its rounds; the writer stores each pair once."""
    from storage.writer import StoreWriter

    st = Store(store)
    judgments = st.read("judgments")
    row = judgments.slice(0, 1).to_pylist()[0]
    twin = {**row, "scenario_id": row["scenario_id"] + "#e2"}  # epoch 2's row: same key, its own scenario
    writer = StoreWriter(st, dim=8)
    writer.add("judgments", [row, twin, twin])  # the stored row again, and epoch 2's twice
    assert writer.buffers["judgments"] == [twin]
    st.write("judgments", pa.Table.from_pylist([twin], schema=judgments.schema))
    assert _view(store, "judgments_raw", "SELECT count(*) FROM judgments_raw")[1] == [(judgments.num_rows + 1,)]
    _summary(store)  # no contradiction: the key is one per scenario
