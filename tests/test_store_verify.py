"""Parts are verified before they are believed (storage.verify): every damaged-part case of issue 11 gives a
clear error naming the part -- from analysis.connect, shp-query and a sweep job -- never a different number;
``shp-query --quarantine`` moves damaged parts aside and a rerun regenerates exactly what was lost."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import analysis
from analysis.query import main as shp_query
from analysis.replay.db import AnalysisError
from storage import Store, StoreError, rounds_schema
from storage.parts import part_digest
from storage.quarantine import QUARANTINE_DIR, REASON_SUFFIX
from storage.resume import done_scenarios
from storage.synthetic import SyntheticSpec, write_synthetic_store
from storage.verify import NO_CHECKSUM, DamagedStore, check_part, require_sound, verify_store

# ------------------------------------------------------------------------------------------- damage


def _rewrite(path: str, change: Callable[[pa.Table], pa.Table]) -> None:
    """Rewrite a part in place, changed (as a tool or a bug outside Store.write would)."""
    table = change(pq.read_table(path))
    pq.write_table(table, path)


def _set(table: pa.Table, name: str, column: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, column)


def _missing_column(path: str) -> None:
    _rewrite(path, lambda t: t.drop_columns(["critic_completion_tokens"]))


def _round_as_text(path: str) -> None:
    _rewrite(path, lambda t: _set(t, "round", pc.cast(t["round"], pa.string())))


def _nan_embedding(path: str) -> None:
    def change(t: pa.Table) -> pa.Table:
        emb = t["embedding"].combine_chunks()
        dim = emb.type.list_size
        vals = emb.flatten().to_numpy().copy().reshape(-1, dim)
        vals[:4, 0] = np.nan  # 7 of the part's rows: 4 NaN, 3 inf
        vals[4:7, 5] = np.inf
        return _set(t, "embedding", pa.FixedSizeListArray.from_arrays(pa.array(vals.reshape(-1), pa.float32()), dim))

    _rewrite(path, change)


def _negative_tokens(path: str) -> None:
    _rewrite(
        path,
        lambda t: _set(t, "critic_completion_tokens", pc.subtract(pc.multiply(t["critic_completion_tokens"], -1), 1)),
    )


def _round_zero(path: str) -> None:
    _rewrite(path, lambda t: _set(t, "round", pa.array([0, *t["round"].to_pylist()[1:]], pa.int32())))


def _round_above_max(path: str) -> None:
    _rewrite(path, lambda t: _set(t, "round", pa.array([*t["round"].to_pylist()[:-1], 99], pa.int32())))


def _bit_flip(path: str) -> None:
    """Flip one bit in the middle of the embedding column's pages; the footer stays intact."""
    meta = pq.read_metadata(path)
    rg = meta.row_group(0)
    col = next(rg.column(i) for i in range(rg.num_columns) if rg.column(i).path_in_schema.startswith("embedding"))
    start = col.dictionary_page_offset or col.data_page_offset
    pos = start + col.total_compressed_size // 2
    data = bytearray(Path(path).read_bytes())
    data[pos] ^= 0x10
    Path(path).write_bytes(bytes(data))


def _truncated(path: str) -> None:
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])


def _zero_bytes(path: str) -> None:
    Path(path).write_bytes(b"")


# name -> (damage, what the error says about it)
DAMAGES: dict[str, tuple[Callable[[str], None], str]] = {
    "missing_column": (_missing_column, "missing column critic_completion_tokens"),
    "round_as_text": (_round_as_text, "column round is string, expected int32"),
    "nan_embedding": (_nan_embedding, "embedding: 7 of 9 rows hold NaN or inf"),
    "negative_tokens": (_negative_tokens, "critic_completion_tokens: 9 of 9 values below 0"),
    "round_zero": (_round_zero, "round: 1 of 9 values below 1"),
    "round_above_max": (_round_above_max, "round: values up to 99"),
    "bit_flip": (_bit_flip, "content hash mismatch"),
    "truncated": (_truncated, "not a whole Parquet file"),
    "zero_bytes": (_zero_bytes, "zero bytes"),
}


def _synthetic(root: Path) -> Store:
    """Two rounds parts of 3 trajectories x 3 rounds (9 rows each), judged; generation max_rounds 3."""
    return write_synthetic_store(root, SyntheticSpec(n_trajectories=6, rounds=3, seed=3, chunk=3))


def _ids(path: str) -> set[str]:
    return set(pq.read_table(path, columns=["scenario_id"])["scenario_id"].to_pylist())


def _assert_named(message: str, part: str, reason: str) -> None:
    assert Path(part).name in message and reason in message, message
    assert "KeyError" not in message and "Binder" not in message


# ------------------------------------------------------------------------------------------- fast tests


@pytest.mark.parametrize("kind", list(DAMAGES))
def test_each_damage_is_refused_with_the_part_named_then_quarantined(tmp_path, kind, capsys) -> None:
    store = _synthetic(tmp_path)
    good, bad = store.parts("rounds")
    lost = _ids(bad)
    con = analysis.connect(tmp_path)
    before = con.execute("SELECT policy, n FROM policy_summary ORDER BY policy").fetchall()
    con.close()
    damage, reason = DAMAGES[kind]
    damage(bad)

    checks = verify_store(store)
    damaged = [c for c in checks if not c.ok]
    assert [c.path for c in damaged] == [bad]
    assert any(reason in p for p in damaged[0].problems), damaged[0].problems
    with pytest.raises(AnalysisError) as err:
        analysis.connect(tmp_path)
    _assert_named(str(err.value), bad, reason)
    assert "--quarantine" in str(err.value)

    assert shp_query(["--store", str(tmp_path), "SELECT count(*) FROM rounds"]) == 2
    _assert_named(capsys.readouterr().err, bad, reason)
    assert shp_query(["--store", str(tmp_path), "--verify"]) == 1
    _assert_named(capsys.readouterr().out, bad, reason)

    assert shp_query(["--store", str(tmp_path), "--quarantine"]) == 0
    said = capsys.readouterr().out
    assert Path(bad).name in said and "readable again" in said
    moved = tmp_path / QUARANTINE_DIR / "rounds" / Path(bad).name
    assert moved.is_file() and not Path(bad).exists()
    why = Path(str(moved) + REASON_SUFFIX).read_text()
    assert reason in why and "from: " in why and "lost: " in why
    assert store.parts("rounds") == [good]

    # The store works again, without the lost trajectories, so a rerun would generate exactly them.
    assert done_scenarios(store, "synthetic-gen") == _ids(good) and not lost & _ids(good)
    con = analysis.connect(tmp_path)
    assert con.execute("SELECT count(DISTINCT scenario_id) FROM trajectories").fetchone()[0] == 3
    after = dict(con.execute("SELECT policy, n FROM policy_summary").fetchall())
    con.close()
    assert set(after) == {p for p, _ in before} and set(after.values()) == {3}
    assert shp_query(["--store", str(tmp_path), "--verify"]) == 0


@pytest.mark.parametrize("kind", ["missing_column", "round_as_text", "nan_embedding", "negative_tokens", "round_zero"])
def test_parts_without_a_checksum_still_get_schema_and_value_checks(tmp_path, kind, capsys) -> None:
    """A part written before hashes (``part-<time>-<uuid>.parquet``, no page checksums) is named by
    --verify as unchecksummed, and its schema and values are still checked."""
    store = _synthetic(tmp_path)
    for path in store.parts("rounds"):
        old = path.split(".sha256-")[0] + ".parquet"
        pq.write_table(pq.read_table(path), old, compression="zstd")  # as the old Store.write did
        os.remove(path)
    one = store.parts("rounds")[0]
    assert part_digest(one) is None
    assert shp_query(["--store", str(tmp_path), "--verify"]) == 0
    out = capsys.readouterr().out
    assert out.count("schema and values ok") == 2 and "2 without a checksum" in out
    assert all(c.checksum == NO_CHECKSUM for c in verify_store(store) if c.table == "rounds")

    damage, reason = DAMAGES[kind]
    damage(one)
    with pytest.raises(DamagedStore) as err:
        require_sound(store)
    _assert_named(str(err.value), one, reason)


def test_page_checksums_catch_a_flip_in_a_part_that_lost_its_name_hash(tmp_path) -> None:
    """The second layer: every page carries a CRC32, so even a renamed part's flipped page is refused."""
    store = _synthetic(tmp_path)
    path = store.parts("rounds")[0]
    renamed = path.split(".sha256-")[0] + ".parquet"
    os.rename(path, renamed)
    _bit_flip(renamed)
    check = check_part(store, "rounds", renamed)
    assert check.checksum == NO_CHECKSUM
    assert any("page checksum mismatch" in p or "undecodable" in p for p in check.problems), check.problems


def test_a_flip_anywhere_in_a_part_is_detected(tmp_path) -> None:
    """Header, pages, footer: the name's sha256 covers every byte (page CRCs alone miss the footer)."""
    store = _synthetic(tmp_path)
    path = store.parts("rounds")[0]
    data = Path(path).read_bytes()
    missed = []
    for pos in range(0, len(data), max(1, len(data) // 400)):
        flipped = bytearray(data)
        flipped[pos] ^= 0x04
        Path(path).write_bytes(bytes(flipped))
        if check_part(store, "rounds", path).ok:
            missed.append(pos)
    assert missed == []


def test_store_write_refuses_values_that_cannot_be(tmp_path) -> None:
    store = Store(tmp_path)
    schema = rounds_schema(4)
    row = {
        "gen_id": ["g"], "scenario_id": ["s"], "round": [1], "draft": ["d"], "feedback": [""], "draft_hash": ["h"],
        "writer_prompt_tokens": [1], "writer_completion_tokens": [1], "critic_prompt_tokens": [1],
        "critic_completion_tokens": [1], "writer_latency_s": [0.1], "critic_latency_s": [0.1],
        "embedding": [[0.5, 0.5, 0.5, 0.5]],
    }  # fmt: skip
    for column, value, said in [
        ("embedding", [[0.5, float("nan"), 0.5, 0.5]], "embedding: 1 of 1 rows hold NaN or inf"),
        ("critic_completion_tokens", [-3], "critic_completion_tokens: 1 of 1 values below 0"),
        ("round", [0], "round: 1 of 1 values below 1"),
        ("writer_latency_s", [float("inf")], "writer_latency_s: 1 of 1 values are inf"),
    ]:
        with pytest.raises(StoreError, match="values that cannot be") as err:
            store.write("rounds", pa.table({**row, column: value}), schema=schema)
        assert said in str(err.value)
    assert store.parts("rounds") == [] and not list(tmp_path.rglob("_tmp-*"))
    path = store.write("rounds", pa.table(row), schema=schema)
    assert part_digest(path) and pq.ParquetFile(path).metadata.num_rows == 1


def test_a_part_is_read_once_then_recorded_by_size_and_mtime(tmp_path) -> None:
    store = _synthetic(tmp_path)
    assert all(c.cached for c in verify_store(store))  # Store.write recorded what it wrote
    assert not any(c.cached for c in verify_store(store, use_record=False))
    path = store.parts("rounds")[0]
    st = os.stat(path)
    _bit_flip(path)
    assert not [c for c in verify_store(store) if c.path == path][0].ok  # mtime changed: read again
    # An edit with its mtime set back still changes the ctime (no user can set it): read again.
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not [c for c in verify_store(store) if c.path == path][0].ok
    assert not [c for c in verify_store(store, use_record=False) if c.path == path][0].ok  # ... as --recheck does


def test_embedding_size_must_be_its_generations(tmp_path) -> None:
    store = _synthetic(tmp_path)
    row = {name: [0] for name in rounds_schema(4).names}
    row.update(gen_id=["synthetic-gen"], scenario_id=["x"], round=[1], draft=["d"], feedback=[""], draft_hash=["h"])
    row.update(writer_latency_s=[0.0], critic_latency_s=[0.0], embedding=[[0.5, 0.5, 0.5, 0.5]])
    row.update(writer_mode=["live"], critic_mode=["live"])
    path = store.write("rounds", pa.table(row), schema=rounds_schema(4))
    damaged = [c for c in verify_store(store) if not c.ok]
    assert [c.path for c in damaged] == [path]
    assert "embedding size 4, but generation synthetic-gen records embedding_dim 384" in damaged[0].problems


def test_verify_and_quarantine_on_a_sound_store(tmp_path, capsys) -> None:
    _synthetic(tmp_path)
    assert shp_query(["--store", str(tmp_path), "--verify", "--recheck"]) == 0
    out = capsys.readouterr().out
    assert "0 damaged; 0 without a checksum" in out and "parts checked" in out
    assert shp_query(["--store", str(tmp_path), "--quarantine"]) == 0
    assert "nothing to quarantine" in capsys.readouterr().out
    assert not (tmp_path / QUARANTINE_DIR).exists()
    assert shp_query(["--store", str(tmp_path / "missing"), "--verify"]) == 2


# ------------------------------------------------------------------------------------------- end to end

# What the error says about a generated part (its row count is the generation's, not 9).
E2E_REASONS = {
    "nan_embedding": "rows hold NaN or inf",
    "negative_tokens": "critic_completion_tokens: ",
    "round_zero": "values below 1",
}
SMALL = ["provider=sim", "dataset.limit=4", "generation.max_rounds=3", "generation.concurrency=4"]
# What a rerun regenerates is what the quarantine left missing (asserted for every kind above); the rerun itself does
# not depend on which check found the damage, so it runs for one kind of each way a part is lost: a checksum (a
# flipped bit), a whole unreadable file (truncated), a value check (a NaN embedding).
REGENERATED = ("bit_flip", "truncated", "nan_embedding")


@pytest.fixture(scope="module")
def generated(tmp_path_factory, ray_session):
    """A real small generation by a sweep job (sim server, Ray, the embedding model): 4 trajectories in
    two rounds parts of 2, replayed; returns (store, job, rounds, summary)."""
    from hydra import compose, initialize_config_module

    import conf.schema  # noqa: F401
    from conf.resolve import to_job
    from sweeps import job as sweep_job
    from sweeps.job import snapshot

    root = tmp_path_factory.mktemp("verify-e2e")
    store = root / "store"
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*SMALL, f"store.path={store}", "report.enabled=false"])
    job = to_job(cfg)
    two_parts = dataclasses.replace(job, generation=dataclasses.replace(job.generation, flush_every=2))
    first = sweep_job.run(
        two_parts, output_dir=root / "run", job_tag="base", config_snapshot=snapshot(cfg), command="t"
    )
    assert (first.trajectories, first.generated) == (4, 4)
    assert len(Store(store).parts("rounds")) == 2
    return store, job, snapshot(cfg), _rounds(store), first.summary


def _rounds(store: Path) -> pa.Table:
    t = Store(store).read("rounds")
    return t.sort_by([("gen_id", "ascending"), ("scenario_id", "ascending"), ("round", "ascending")])


@pytest.mark.integration
@pytest.mark.parametrize("kind", list(DAMAGES))
def test_damaged_generated_part_is_refused_everywhere_then_repaired_and_regenerated(
    generated, tmp_path, kind, capsys
) -> None:
    from sweeps import job as sweep_job

    base, job, snap, rounds, summary = generated
    store = tmp_path / "store"
    shutil.copytree(base, store)  # with its response cache: the rerun repays no call
    case = dataclasses.replace(job, store=Store(store))
    part = Store(store).parts("rounds")[0]
    lost = _ids(part)
    damage, reason = DAMAGES[kind]
    reason = E2E_REASONS.get(kind, reason)
    damage(part)

    with pytest.raises(AnalysisError) as err:
        analysis.connect(store)
    _assert_named(str(err.value), part, reason)
    assert shp_query(["--store", str(store), "SELECT policy, avg(operational_tokens) FROM replay GROUP BY 1"]) == 2
    _assert_named(capsys.readouterr().err, part, reason)
    manifests = len(Store(store).parts("manifests"))
    with pytest.raises(sweep_job.JobFailed) as failed:
        sweep_job.run(case, output_dir=tmp_path / "refused", job_tag="x", config_snapshot=snap, command="t")
    _assert_named(str(failed.value), part, reason)
    assert len(Store(store).parts("manifests")) == manifests  # refused before anything was written
    if kind == "zero_bytes":  # the command itself: exit 1, the part named, no traceback
        done = subprocess.run(
            [str(Path(sys.executable).parent / "shp-sweep"), *SMALL, f"store.path={store}",
             f"hydra.run.dir={tmp_path / 'cli'}", "report.enabled=false"],
            capture_output=True, text=True, timeout=300, env={**os.environ, "CI": "true"},
        )  # fmt: skip
        assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
        _assert_named(done.stderr, part, reason)
        assert "Traceback" not in done.stdout + done.stderr

    assert shp_query(["--store", str(store), "--verify"]) == 1
    _assert_named(capsys.readouterr().out, part, reason)
    assert shp_query(["--store", str(store), "--quarantine"]) == 0
    said = capsys.readouterr().out
    assert Path(part).name in said and "readable again" in said
    if kind not in ("truncated", "zero_bytes"):
        assert all(s in said for s in lost)  # what a rerun regenerates, by scenario id
    gen_id = rounds["gen_id"][0].as_py()
    assert done_scenarios(Store(store), gen_id) == set(rounds["scenario_id"].to_pylist()) - lost

    if kind not in REGENERATED:
        return
    again = sweep_job.run(case, output_dir=tmp_path / "rerun", job_tag="rerun", config_snapshot=snap, command="t")
    assert (again.trajectories, again.generated, again.generation_calls) == (4, len(lost), 0)  # no paid call
    restored = _rounds(store)
    assert restored.num_rows == rounds.num_rows
    for name in rounds.column_names:  # exactly the original rows ...
        if name != "embedding":
            assert restored[name].equals(rounds[name]), name
    # ... but the embedding model's float32 rounding depends on the micro-batch a draft lands in (<= 2e-7 seen)
    emb = [np.stack(t["embedding"].to_numpy(zero_copy_only=False)) for t in (restored, rounds)]
    assert np.abs(emb[0] - emb[1]).max() < 1e-6
    # The same numbers (a float may differ in its last bit: DuckDB sums in the order it reads the parts).
    assert [r["policy"] for r in again.summary] == [r["policy"] for r in summary]
    for got, want in zip(again.summary, summary, strict=True):
        for key, value in want.items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15, nan_ok=True), (got["policy"], key)
            else:
                assert got[key] == value, (got["policy"], key)
