"""Atomic part writes: readers see whole parts only; a bad table is refused, nothing written."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import Store, StoreError, rounds_schema
from storage.schemas import FAILURES


def _failure_rows(n: int) -> pa.Table:
    return pa.table(
        {
            "gen_id": ["g"] * n,
            "scenario_id": [f"s{i}" for i in range(n)],
            "round": [1] * n,
            "stage": ["writer"] * n,
            "error_type": ["ProviderError"] * n,
            "message": ["HTTP 401"] * n,
            "created_at": pa.array([0] * n, pa.timestamp("us", tz="UTC")),
        }
    )


def test_write_and_read_back(tmp_path):
    store = Store(tmp_path)
    path = store.write("failures", _failure_rows(3))
    assert path.endswith(".parquet") and "/failures/gen_id=g/part-" in path  # the generation's folder
    store.write("failures", _failure_rows(2))
    table = store.read("failures")
    assert table.num_rows == 5 and table.schema.equals(FAILURES)
    assert store.globs("failures") == [f"{store.uri}/failures/gen_id=*/*.parquet"]
    assert store.globs("failures", "g") == [f"{store.uri}/failures/gen_id=g/*.parquet"]
    assert store.globs("failures", "other") == [] and store.parts("failures", "other") == []


def test_empty_and_unknown_tables(tmp_path):
    store = Store(tmp_path)
    assert store.read("rounds").num_rows == 0
    assert store.write("failures", _failure_rows(0)) == ""
    with pytest.raises(StoreError, match="unknown table"):
        store.write("nope", _failure_rows(1))


def test_schema_mismatch_is_refused_and_writes_nothing(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(StoreError, match="failures"):
        store.write("failures", _failure_rows(2).drop_columns(["stage"]))
    assert store.parts("failures") == []


def test_temp_files_are_invisible_and_swept(tmp_path):
    store = Store(tmp_path)
    store.write("failures", _failure_rows(1))
    folder = tmp_path / "failures"
    (folder / "_tmp-20260101T000000-dead.partial").write_bytes(b"half a parquet file")
    assert len(store.parts("failures")) == 1
    assert store.read("failures").num_rows == 1
    assert store.sweep_temp() == 1
    assert not list(folder.glob("_tmp-*"))


def test_rounds_embedding_keeps_its_fixed_size(tmp_path):
    store = Store(tmp_path)
    schema = rounds_schema(4)
    row = {name: [None] for name in schema.names}
    row.update(gen_id=["g"], scenario_id=["s"], round=[1], draft=["d"], feedback=[""], draft_hash=["h"])
    row["embedding"] = [[0.5, 0.5, 0.5, 0.5]]
    path = store.write("rounds", pa.table(row), schema=schema)
    assert pq.read_schema(path).field("embedding").type == pa.list_(pa.float32(), 4)
