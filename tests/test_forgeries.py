"""Checks a writer cannot attest (issue 47, docs/store.md "Threat model"): each forgery of the issue's probe, which
gave other numbers with exit 0 and a clean ``--verify``, is now refused, discarded or computed again.

- a kept replay_inputs DuckDB file edited and renamed to its new hash;
- a kept constants file (``constants/t95-*.json``) edited with its checksum recomputed;
- a part changed in place plus a line appended to ``<store>/_cache/verified-parts.jsonl`` that vouches for it;
- a ``trajectory_inputs`` part replaced by an edited one under its new hash.

And the range checks on read: a part of absurd token counts (2^62, which an older shp-import took) is named as
damaged in one line, never an INT64 overflow in every query; once quarantined, the other parts query as before.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import analysis
import analysis.replay.derived as derived
from analysis import sql
from analysis.query import main as shp_query
from analysis.replay import signals_store
from analysis.replay.db import AnalysisError, setup_of
from storage.kept import CONSTANTS_DIRNAME
from storage.parts import HASH_HEX, Store
from storage.schemas import METRIC_COLUMNS
from storage.synthetic import SyntheticSpec, write_synthetic_store
from storage.user_cache import cache_root, reader_dir
from storage.user_key import key_path

SUMMARY = "SELECT split, policy, mean_operational_tokens, mean_is FROM policy_summary ORDER BY split, policy"


@pytest.fixture
def plain(tmp_path) -> Path:
    """A store without stored replay inputs: opening it computes them into a kept DuckDB file."""
    write_synthetic_store(tmp_path / "plain", SyntheticSpec(n_trajectories=8, rounds=3, dim=8, seed=4))
    return tmp_path / "plain"


@pytest.fixture
def store(tmp_path) -> Path:
    root = tmp_path / "store"
    write_synthetic_store(root, SyntheticSpec(n_trajectories=8, rounds=3, dim=8, seed=4))
    signals_store.build(Store(root))  # signals and trajectory_inputs, as a generation writes them
    return root


def _summary(root: Path) -> list[tuple]:
    con = analysis.connect(root)
    try:
        return con.sql(SUMMARY).fetchall()
    finally:
        con.close()


def _same(got: list[tuple], want: list[tuple]) -> bool:
    """The same summary: names and token means exactly, mean IS to 1e-12 (DuckDB's threads sum in any order)."""
    return [r[:3] for r in got] == [r[:3] for r in want] and [r[3] for r in got] == pytest.approx(
        [r[3] for r in want], rel=1e-12
    )


def _verify(root: Path, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = shp_query(["--store", str(root), "--verify", *extra])
    return code, capsys.readouterr().out


def _write_under_its_hash(folder: Path, table: pa.Table) -> Path:
    """``table`` as a part named with the sha256 of its bytes, as Store.write names one (what a forger can do)."""
    buf = io.BytesIO()
    pq.write_table(table, buf)
    data = buf.getvalue()
    path = (
        folder
        / f"part-20260101T000000-{uuid.uuid4().hex[:12]}.sha256-{hashlib.sha256(data).hexdigest()[:HASH_HEX]}.parquet"
    )
    path.write_bytes(data)
    return path


def test_the_user_key_is_private_and_outside_the_store(store) -> None:
    _summary(store)
    key = key_path()
    assert key.is_file() and key.is_relative_to(cache_root()) and not key.is_relative_to(store)
    assert key.stat().st_mode & 0o777 == 0o600


def test_a_kept_inputs_file_edited_and_renamed_to_its_new_hash_is_not_read(plain, capsys, caplog) -> None:
    right = _summary(plain)
    folder = reader_dir(Store(plain)) / derived.DIRNAME
    (path,) = folder.glob("replay_inputs-*.duckdb")
    with duckdb.connect(str(path)) as db:  # every trajectory's loop tokens, as the probe did
        db.execute("UPDATE replay_inputs SET lt = list_transform(lt, lambda x: x + 250000)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:HASH_HEX]
    forged = folder / f"{path.name.split('.', 1)[0]}.hmac-{digest}.duckdb"  # named with its new bytes' hash
    path.rename(forged)
    st = forged.stat()
    with open(folder / "verified.jsonl", "a") as fh:  # and a record line saying it was hashed unchanged
        fh.write(json.dumps({"name": forged.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}))
        fh.write("\n")
    code, out = _verify(plain, capsys)
    assert code == 1 and f"DAMAGED {forged} [kept file]: keyed hash" in out
    with caplog.at_level(logging.WARNING):
        assert _same(_summary(plain), right)  # never read: discarded and built again
    assert not forged.exists() and len(list(folder.glob("replay_inputs-*.duckdb"))) == 1
    assert any(str(forged) in r.getMessage() for r in caplog.records)
    assert _verify(plain, capsys, "--recheck")[0] == 0


def test_a_constants_file_edited_with_its_checksum_recomputed_is_not_read(store, capsys) -> None:
    _summary(store)
    (path,) = (cache_root() / CONSTANTS_DIRNAME).glob("t95-*.json")
    right = sql._t95_quantiles.__wrapped__()  # the kept-file reader, past this process's memo
    kept = json.loads(path.read_text())
    kept["payload"]["values"][0] = 0.0  # t at df=1: every one-sided bound at n=2 collapses
    body = json.dumps(kept["payload"], sort_keys=True).encode()
    for field in ("sha256", "hmac"):  # the old format's checksum and the new one's name, recomputed without the key
        forged = {k: v for k, v in kept.items() if k not in ("sha256", "hmac")}
        forged[field] = hashlib.sha256(body).hexdigest()
        path.write_text(json.dumps(forged))
        code, out = _verify(store, capsys)
        assert code == 1 and f"DAMAGED {path} [kept file]" in out
        assert sql._t95_quantiles.__wrapped__() == right  # computed again, and kept again as computed
        assert json.loads(path.read_text())["payload"]["values"][0] == right[0]
    assert _verify(store, capsys)[0] == 0


def test_a_changed_part_with_a_record_line_vouching_for_it_is_verified_again(store, capsys) -> None:
    root = Store(store)
    _summary(store)
    (path,) = root.parts("judgments")[:1]
    table = pq.read_table(path)
    metric = METRIC_COLUMNS[0]
    table = table.set_column(
        table.schema.get_field_index(metric), metric, pa.array([1.0] * table.num_rows, pa.float64())
    )
    pq.write_table(table, path)  # changed in place: its name's hash no longer matches
    st = os.stat(path)
    record = store / "_cache" / "verified-parts.jsonl"
    lines = [json.loads(x) for x in record.read_text().splitlines()]
    (line,) = [x for x in lines if x["key"].endswith(path)]
    vouch = {**line, "size": st.st_size, "mtime_ns": st.st_mtime_ns}  # the writer's line, for the new bytes
    with open(record, "a") as fh:
        fh.write(json.dumps(vouch) + "\n")
    with pytest.raises(AnalysisError) as err:
        _summary(store)
    assert "sha256" in str(err.value) and Path(path).name in str(err.value)
    code, out = _verify(store, capsys)
    assert code == 1 and "DAMAGED" in out and Path(path).name in out


def _forged_inputs(part: str) -> pa.Table:
    """The trajectory_inputs rows of ``part`` with every verdict of every round made perfect (IS 1)."""
    table = pq.read_table(part)
    rounds = table["rounds"].combine_chunks()
    structs = rounds.values
    fields = [
        pa.array([1.0] * len(structs), structs.type.field(i).type)
        if structs.type.field(i).name in METRIC_COLUMNS
        else structs.field(i)
        for i in range(structs.type.num_fields)
    ]
    forged = pa.ListArray.from_arrays(rounds.offsets, pa.StructArray.from_arrays(fields, fields=list(structs.type)))
    return table.set_column(table.schema.get_field_index("rounds"), table.schema.field("rounds"), forged)


def test_a_trajectory_inputs_part_replaced_under_its_new_hash_is_refused(store, capsys) -> None:
    con = analysis.connect(store)
    assert setup_of(con).inputs == "written"  # the stored rows are what the replay reads
    right = con.sql(SUMMARY).fetchall()
    con.close()
    assert _verify(store, capsys, "--recheck")[0] == 0  # the written rows are what their parts give: sound
    root = Store(store)
    part = root.parts("trajectory_inputs")[0]
    _write_under_its_hash(Path(part).parent, _forged_inputs(part))
    os.unlink(part)
    with pytest.raises(ValueError, match="trajectory_inputs") as err:
        _summary(store)
    assert "are not what signals part" in str(err.value)
    code, out = _verify(store, capsys)
    assert code == 1 and "are not what signals part" in out
    assert shp_query(["--store", str(store), "--quarantine"]) == 0
    assert _same(_summary(store), right)  # computed from the parts, as for a store without stored inputs


def test_absurd_token_counts_in_one_part_are_named_not_an_overflow_in_every_query(store, capsys) -> None:
    right = _summary(store)
    root = Store(store)
    part = root.parts("rounds")[0]
    table = pq.read_table(part)
    big = pa.array([2**62] * table.num_rows, pa.int64())  # what an older shp-import took with exit 0
    table = table.set_column(table.schema.get_field_index("writer_prompt_tokens"), "writer_prompt_tokens", big)
    _write_under_its_hash(Path(part).parent, table.select(table.column_names))
    with pytest.raises(ValueError) as err:
        _summary(store)
    said = str(err.value)
    assert "writer_prompt_tokens" in said and "above 1000000000" in said and "Overflow" not in said
    assert shp_query(["--store", str(store), "--quarantine"]) == 0
    assert _same(_summary(store), right)
