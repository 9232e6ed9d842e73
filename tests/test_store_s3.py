"""The store on object storage, end to end, against a real S3 API on 127.0.0.1 (moto's server over HTTP).

Generation writes its parts to ``s3://bucket/prefix`` through the project's own path (the in-process
backend, the scripted provider); ``analysis.connect`` replays them through registered pyarrow datasets
(no DuckDB extension), ``shp-query`` answers, the report is written, compaction and resume work, a
killed writer leaves nothing a reader lists, and missing credentials, a wrong endpoint and a missing
bucket are one line each before any other call. Credentials come from the AWS environment variables
only and never reach a message or a manifest.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import analysis
from analysis.query import main as shp_query
from analysis.replay.db import AnalysisError
from analysis.report import write_report
from analysis.stats.gain_fit import fit_gain_model
from shp_ray.generation import generate as generate_module
from shp_ray.generation.datasets import load_scenarios
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.policy.table import family_policies, standard_policies
from shp_ray.providers.base import ProviderSpec
from storage import compact
from storage.manifest import new_run_id, write_manifest
from storage.parts import Store, StoreUnusable, open_store
from storage.schemas import TABLES
from storage.verify import verify_store
from tests.s3_support import SECRET, moto, s3

pytestmark = pytest.mark.integration
__all__ = ["moto", "s3"]  # the fixtures, shared with test_store_s3_sweep

SPEC = ProviderSpec(kind="scripted", model="scripted-model")
FACTORY = "tests.gen_support:make_provider"
CFG = GenerationConfig(max_rounds=3, embedder="fake-hash", workers=1, concurrency=4)
SUMMARY_SQL = "SELECT policy, n, mean_rounds, mean_operational_tokens FROM policy_summary ORDER BY policy"


def _objects(fs: pafs.FileSystem, bucket: str) -> list[str]:
    infos = fs.get_file_info(pafs.FileSelector(bucket, recursive=True))
    return sorted(i.path for i in infos if i.type == pafs.FileType.File)


def _scenarios(n: int):
    return load_scenarios("shp_paper", limit=n)


def _generate(uri: str, n: int):
    return generate(_scenarios(n), CFG, Store(uri), SPEC, RunOptions(provider_factory=FACTORY, backend="local"))


def _summary(root) -> list[tuple]:
    con = analysis.connect(root)
    try:
        return con.execute(SUMMARY_SQL).fetchall()
    finally:
        con.close()


def _one_line_without_secrets(text: str) -> None:
    assert "Traceback" not in text and SECRET not in text and "AKIDTESTING" not in text


# --- every journey --------------------------------------------------------------------------------


def test_generation_query_report_on_s3_equal_the_local_store(s3, tmp_path, capsys, caplog) -> None:
    fs, bucket = s3
    uri = f"s3://{bucket}/runs/store"
    with caplog.at_level(logging.INFO, logger="shp_ray.store"):
        summary = _generate(uri, 5)
    assert summary.generated == 5
    # The side files that cannot live in S3 stay on this machine, and a log line says where.
    local_state = [r.getMessage() for r in caplog.records if "on object storage" in r.getMessage()]
    assert len(local_state) == 1 and str(tmp_path / "xdg" / "shp-ray" / "stores") in local_state[0]
    assert (tmp_path / "xdg" / "shp-ray" / "stores").is_dir()
    objects = _objects(fs, bucket)
    assert objects and all(o.startswith(f"{bucket}/runs/store/") for o in objects)
    assert not [o for o in objects if "/_tmp-" in o or "_cache" in o or o.endswith(".sqlite")]
    # The same generation written to a local folder replays to the same numbers.
    local = tmp_path / "local-store"
    generate(_scenarios(5), CFG, Store(local), SPEC, RunOptions(provider_factory=FACTORY, backend="local"))
    remote_rows = _summary(uri)
    assert remote_rows == _summary(local) and len(remote_rows) > 10
    con = analysis.connect(
        analysis.ReplayScope(uri, gen_id=summary.gen_id)
    )  # one generation: its partition folder only
    assert con.execute("SELECT count(*) FROM replay WHERE policy = 'shp'").fetchall() == [(5,)]
    assert con.execute("SELECT typeof(embedding) FROM round_parts LIMIT 1").fetchall() == [("FLOAT[]",)]
    con.close()
    # shp-query --store s3://... answers (read-only sandbox included).
    assert shp_query(["--store", uri, "--format", "json", "SELECT count(*) AS n FROM replay WHERE policy = 'shp'"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 5}]
    assert shp_query(["--store", uri, "COPY replay TO 'x.csv'"]) == 2
    capsys.readouterr()
    # The report reads it too.
    report = write_report(uri, tmp_path / "report", n_resamples=50)
    assert report.is_file() and (tmp_path / "report" / "policy_summary.csv").is_file()
    # The other stopping families read the embeddings through the same datasets; the gain model's
    # artefact is written into the store, in one upload.
    con = analysis.connect(uri, policies=standard_policies() + family_policies())
    assert con.execute("SELECT count(DISTINCT policy) FROM family_replay").fetchall()[0][0] >= 10
    con.close()
    _, artefact = fit_gain_model(Store(uri), summary.gen_id)
    fit = artefact.rsplit("/", 1)[1].removesuffix(".json")
    assert artefact == f"{uri}/artefacts/gain_model/{summary.gen_id}/{fit}.json"
    assert f"{bucket}/runs/store/artefacts/gain_model/{summary.gen_id}/{fit}.json" in _objects(fs, bucket)
    # The manifests (config snapshots) hold no credential.
    con = analysis.connect(uri)
    texts = con.execute("SELECT config_json || command FROM manifests").fetchall()
    con.close()
    assert texts and not [t for (t,) in texts if SECRET in t or "AKIDTESTING" in t]


def test_compaction_on_s3_keeps_every_row_once(s3) -> None:
    fs, bucket = s3
    uri = f"s3://{bucket}/store"
    for n in (2, 4, 6):  # three runs: three parts per table in the generation's folder
        _generate(uri, n)
    store = Store(uri)
    before = _summary(uri)
    assert len(store.parts("rounds")) == 3
    assert compact.main([uri, "rounds", "signals"]) == 0
    assert len(store.parts("rounds")) == 1 and len(store.parts("signals")) == 1
    assert _summary(uri) == before
    assert not [o for o in _objects(fs, bucket) if "/_tmp-" in o or "/_compact-" in o]


@pytest.mark.parametrize("stage", ["journal_written", "sources_deleted", "copied"])
def test_a_killed_compaction_on_s3_rolls_forward(s3, stage: str) -> None:
    """The S3 order: temp complete -> journal -> sources deleted -> copy -> temp and journal deleted.
    Killed anywhere, a reader never counts a row twice, and recover() finishes the merge."""
    fs, bucket = s3
    uri = f"s3://{bucket}/store"
    for n in (2, 4):
        _generate(uri, n)
    store = Store(uri)
    before = _summary(uri)
    sources = store.parts("rounds")
    folder = sources[0].rsplit("/", 1)[0]
    tmp, final = f"{folder}/_tmp-killed.partial", f"{folder}/part-merged.parquet"
    merged = pa.concat_tables([pq.read_table(p, filesystem=fs) for p in sources])
    with fs.open_output_stream(tmp) as out:
        pq.write_table(merged, out)
    plan = {"sources": sources, "tmp": tmp, "final": final, "forward": True}
    store.put_bytes(f"{store.table_path('rounds')}/{compact.JOURNAL_PREFIX}killed.json", json.dumps(plan).encode())
    if stage in ("sources_deleted", "copied"):
        for src in sources:
            fs.delete_file(src)
    if stage == "copied":
        fs.copy_file(tmp, final)
    listed = [pq.read_table(p, filesystem=fs, columns=["scenario_id", "round"]) for p in store.parts("rounds")]
    keys = [k for t in listed for k in zip(t["scenario_id"].to_pylist(), t["round"].to_pylist(), strict=True)]
    assert len(keys) == len(set(keys))  # a reader in the middle never sees a round twice
    assert compact.recover(store) == 1
    assert _summary(uri) == before
    assert not [o for o in _objects(fs, bucket) if "/_tmp-" in o or "/_compact-" in o]


def test_resume_after_a_kill_reads_no_leftover(s3, monkeypatch) -> None:
    fs, bucket = s3
    uri = f"s3://{bucket}/store"
    first = _generate(uri, 3)
    store = Store(uri)
    (part,) = store.parts("rounds")
    folder = part.rsplit("/", 1)[0]
    # What a killed writer of an older version (or a killed compaction before its journal) leaves: a temp
    # object holding WHOLE, valid rows -- were it read, every trajectory would count twice.
    leftover = f"{folder}/_tmp-20260101T000000-dead.partial"
    fs.copy_file(part, leftover)
    assert store.parts("rounds") == [part]
    assert _summary(uri)  # check_trajectories would refuse a trajectory seen twice
    # The resumed run generates only what is missing; a young temp is left alone (it may be a live
    # writer's), an old one is swept.
    monkeypatch.setattr(generate_module, "TEMP_GRACE_S", 0.0)
    again = generate(_scenarios(5), CFG, Store(uri), SPEC, RunOptions(provider_factory=FACTORY, backend="local"))
    assert (first.generated, again.generated, again.skipped) == (3, 2, 3)
    assert leftover not in _objects(fs, bucket)
    con = analysis.connect(uri)
    assert con.execute("SELECT count(*), count(DISTINCT scenario_id) FROM replay WHERE policy = 'shp'").fetchall() == [
        (5, 5)
    ]
    con.close()


_KILLED_WRITER = """
import numpy as np, pyarrow as pa
from storage.parts import Store
from storage.schemas import rounds_schema
n, schema = 20_000, rounds_schema(384)  # ~30 MB: a multipart upload of 3 parts
cols = {f.name: pa.array([0] * n, f.type) for f in schema if pa.types.is_integer(f.type)}
cols.update({f.name: pa.array([0.0] * n, f.type) for f in schema if pa.types.is_floating(f.type)})
cols.update({f.name: pa.array([f"s{i}" for i in range(n)]) for f in schema if pa.types.is_string(f.type)})
cols.update(gen_id=pa.array(["g"] * n), round=pa.array([1] * n, pa.int32()))
cols.update(writer_mode=pa.array(["live"] * n), critic_mode=pa.array(["live"] * n))  # a call mode: live | batch
vectors = np.random.default_rng(0).standard_normal((n, 384)).astype(np.float32)
cols["embedding"] = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 384)
print("writing", flush=True)
Store("{uri}").write("rounds", pa.table(cols).select(schema.names).cast(schema), schema)
print("written", flush=True)
"""


def test_a_writer_killed_mid_upload_leaves_nothing_a_reader_lists(s3, moto) -> None:
    """A part too large for one PutObject goes up as a multipart upload: killed during it, the object
    never appears (S3 shows an object only once its upload completes)."""
    boto3 = pytest.importorskip("boto3")
    fs, bucket = s3
    uri = f"s3://{bucket}/store"
    _generate(uri, 2)
    parts_before = Store(uri).parts("rounds")
    client = boto3.client(
        "s3", endpoint_url=moto, aws_access_key_id="AKIDTESTING", aws_secret_access_key=SECRET, region_name="us-east-1"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER.replace("{uri}", uri)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not client.list_multipart_uploads(Bucket=bucket).get("Uploads"):
            assert proc.poll() is None, f"the writer ended before it was killed: {proc.communicate()}"
            assert time.monotonic() < deadline, "no multipart upload seen"
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)  # mid-upload (or, on a failure above, so as not to leave it running)
        out, _ = proc.communicate(timeout=30)
    assert "written" not in out
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads")  # pending: invisible
    assert Store(uri).parts("rounds") == parts_before
    assert [o for o in _objects(fs, bucket) if "/rounds/" in o] == parts_before
    assert len(_summary(uri)) > 10  # the store reads as before the kill


def test_verify_and_quarantine_on_s3(s3, capsys) -> None:
    fs, bucket = s3
    uri = f"s3://{bucket}/store"
    _generate(uri, 3)
    store = Store(uri)
    # Store.write recorded what it wrote; the listing's mtime matches the record's (to the second).
    assert all(c.cached and c.ok for c in verify_store(store))
    assert shp_query(["--store", uri, "--verify"]) == 0
    (part,) = store.parts("rounds")
    with fs.open_input_file(part) as fh:
        data = fh.read()
    with fs.open_output_stream(part) as out:  # the same name, half the bytes (a same-size change within
        out.write(data[: len(data) // 2])  # the same second needs --recheck: S3 dates objects to the second)
    assert shp_query(["--store", uri, "--verify"]) == 1
    assert "DAMAGED" in capsys.readouterr().out
    assert shp_query(["--store", uri, "--quarantine"]) == 0
    assert store.parts("rounds") == []
    assert [o for o in _objects(fs, bucket) if "/_quarantine/rounds/" in o and o.endswith(".parquet")]
    con = analysis.connect(uri)  # readable again, without the lost trajectories
    assert con.execute("SELECT count(*) FROM replay").fetchall() == [(0,)]
    con.close()


# --- one clear error before any call ----------------------------------------------------------------


def _query_error(uri: str, capsys) -> str:
    t0 = time.monotonic()
    assert shp_query(["--store", uri, "SELECT 1"]) == 2
    assert time.monotonic() - t0 < 30
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("shp-query: ")
    _one_line_without_secrets(err)
    return err


def test_missing_credentials_are_one_line_before_any_call(s3, monkeypatch, capsys, closed_port) -> None:
    _, bucket = s3
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    # An endpoint nothing listens on: were a call made, the error would be about connecting.
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed_port}")
    err = _query_error(f"s3://{bucket}/store", capsys)
    assert f"s3://{bucket}/store: no credentials: AWS_ACCESS_KEY_ID is not set" in err
    with pytest.raises(StoreUnusable, match="no credentials"):
        Store(f"s3://{bucket}/store")


def test_credentials_in_the_store_path_are_refused_and_not_echoed(s3, capsys) -> None:
    _, bucket = s3
    err = _query_error(f"s3://AKIDTESTING:{SECRET}@{bucket}/store", capsys)
    assert f"s3://<redacted>@{bucket}/store: credentials in the store path are refused" in err
    err = _query_error(f"s3://{bucket}/store?endpoint_override=127.0.0.1:9", capsys)
    assert "options in the store path are not read" in err


def test_a_wrong_endpoint_is_one_line_in_seconds(s3, monkeypatch, capsys, closed_port) -> None:
    _, bucket = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed_port}")
    err = _query_error(f"s3://{bucket}/store", capsys)
    assert f"http://127.0.0.1:{closed_port}" in err and "connect" in err.lower()
    monkeypatch.setenv("AWS_ENDPOINT_URL", "127.0.0.1:9000")  # no scheme
    assert "AWS_ENDPOINT_URL must be an http(s)://host[:port] URL" in _query_error(f"s3://{bucket}/store", capsys)


def test_a_missing_bucket_is_one_line(s3, capsys) -> None:
    err = _query_error("s3://no-such-bucket-here/store", capsys)
    assert "bucket 'no-such-bucket-here' does not exist" in err
    with pytest.raises(StoreUnusable, match="does not exist"):
        open_store(Store("s3://no-such-bucket-here/store"))
    assert compact.main(["s3://no-such-bucket-here/store"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_every_table_has_a_source_on_s3(s3) -> None:
    """A fresh store (its run's manifest, no other part yet): every view exists (typed, empty). A prefix with no
    object at all holds no store: refused in one line."""
    _, bucket = s3
    uri = f"s3://{bucket}/empty"
    Store(uri).write("failures", pa.Table.from_pylist([], schema=TABLES["failures"]))  # writes nothing
    with pytest.raises(AnalysisError, match=f"no store at s3://{bucket}/empty: it holds no table folder"):
        analysis.connect(uri)
    write_manifest(Store(uri), new_run_id(), {}, {})  # what a sweep writes first
    con = analysis.connect(uri)
    for table in ("scenarios", "generations", "failures", "results", "feedback_embeddings"):
        assert con.execute(f"SELECT count(*) FROM {table}").fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM manifests").fetchall() == [(1,)]
    con.close()


def test_generation_in_a_subprocess_reads_the_same_environment(s3) -> None:
    """Workers (Ray actors, processes) resolve the store from the same AWS environment variables."""
    _, bucket = s3
    uri = f"s3://{bucket}/store"
    code = f"from storage.parts import Store; print(len(Store({uri!r}).parts('rounds')))"
    _generate(uri, 1)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy())
    assert done.stdout.strip() == "1", done.stderr
