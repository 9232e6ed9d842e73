"""store.path (and report.out) checked before anything runs: a file in the way, a folder that cannot
be written, an unreachable or missing bucket are a ConfigError naming the key, in one line, within
seconds, and the check itself leaves nothing behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conf.resolve import ConfigError
from storage.parts import PROBE_PREFIX, StoreUnusable, check_root
from tests import test_conf
from tests.test_conf import job_of

hydra_ctx = test_conf.hydra_ctx  # the compose fixture, shared with test_conf


def refused(*overrides: str) -> str:
    """The ConfigError message of a job that must not start."""
    with pytest.raises(ConfigError) as err:
        job_of(*overrides)
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- local paths ---------------------------------------------------------------------------------


def test_a_store_path_that_is_a_file_is_refused(hydra_ctx, tmp_path):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    message = refused(f"store.path={afile}")
    assert message.startswith("store.path: ") and str(afile) in message and "is a file" in message
    assert afile.read_text() == "mine" and listing(tmp_path) == ["notes.txt"]


def test_a_store_path_under_a_file_is_refused(hydra_ctx, tmp_path):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    message = refused(f"store.path={afile / 'runs' / 'store'}")
    assert message.startswith("store.path: ") and f"{afile} is a file" in message
    assert listing(tmp_path) == ["notes.txt"]


@pytest.fixture
def read_only_dir(tmp_path):
    """A folder this process cannot create entries in, also when it runs as root.

    chmod 0555 is enough for an ordinary user; root ignores permission bits, so then the folder is
    made immutable (``chattr +i``, ext4 / xfs / btrfs with CAP_LINUX_IMMUTABLE) -- the closest thing
    to a read-only mount that needs no mount privilege. Skipped where neither works.
    """
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    immutable = False
    if _can_create_in(folder):
        chattr = shutil.which("chattr")
        if chattr and subprocess.run([chattr, "+i", str(folder)], capture_output=True).returncode == 0:
            immutable = True
        if not immutable or _can_create_in(folder):
            _unlock(folder, immutable)
            pytest.skip("cannot make a folder unwritable here (root without chattr +i)")
    yield folder
    _unlock(folder, immutable)


def _can_create_in(folder: Path) -> bool:
    try:
        (folder / "x").mkdir()
    except OSError:
        return False
    (folder / "x").rmdir()
    return True


def _unlock(folder: Path, immutable: bool) -> None:
    if immutable:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    folder.chmod(0o755)


def test_a_store_path_in_a_read_only_folder_is_refused(hydra_ctx, read_only_dir):
    message = refused(f"store.path={read_only_dir / 'store'}")
    assert message.startswith("store.path: ") and str(read_only_dir) in message
    assert listing(read_only_dir) == []


def test_an_existing_read_only_store_is_refused(hydra_ctx, read_only_dir):
    assert refused(f"store.path={read_only_dir}").startswith("store.path: ")


def test_the_probe_catches_what_os_access_does_not(tmp_path):
    """/sys (sysfs) passes os.access(W_OK) for root, yet nothing can be created in it."""
    if not Path("/sys").is_dir():
        pytest.skip("no /sys here")
    with pytest.raises(StoreUnusable, match=r"^(/sys is not writable|cannot create a folder in /sys: )"):
        check_root("/sys/shp-store")


def test_report_out_is_checked_like_the_store(hydra_ctx, tmp_path):
    afile = tmp_path / "report.md"
    afile.write_text("old")
    assert refused(f"report.out={afile}").startswith(f"report.out: {afile} is a file")
    job_of(f"report.out={afile}", "report.enabled=false")  # no report, nothing to check


def test_a_good_local_store_passes_and_nothing_is_created(hydra_ctx, tmp_path):
    store = tmp_path / "deep" / "runs" / "store"
    job = job_of(f"store.path={store}", f"report.out={tmp_path / 'report'}")
    assert job.store.root == str(store) and job.store.uri == str(store.resolve())
    assert listing(tmp_path) == []  # neither the store nor a probe entry is left behind
    store.mkdir(parents=True)
    (store / "manifests").mkdir()
    job_of(f"store.path={store}")  # an existing store is fine
    assert listing(store) == ["manifests"]
    assert not [p for p in tmp_path.rglob(f"{PROBE_PREFIX}*")]


def test_a_file_uri_is_checked_as_the_local_path(tmp_path):
    afile = tmp_path / "f"
    afile.write_text("x")
    with pytest.raises(StoreUnusable, match="is a file"):
        check_root(f"file://{afile}")
    check_root(f"file://{tmp_path / 'store'}")
    assert listing(tmp_path) == ["f"]


# --- URI stores ----------------------------------------------------------------------------------


@pytest.fixture
def aws_env(monkeypatch):
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no credential lookup on a metadata service
    return monkeypatch


def test_an_unreachable_s3_endpoint_is_refused_in_seconds_without_the_secret(hydra_ctx, aws_env, closed_port):
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", "TOPSECRETVALUE")
    aws_env.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed_port}")
    message = refused("store.path=s3://bucket/store")
    assert message.startswith("store.path: s3://bucket/store: ")
    assert "no answer within" not in message  # refused by the closed port itself, not after the check's timeout
    assert "TOPSECRETVALUE" not in message and f"127.0.0.1:{closed_port}" in message
    assert "connect" in message.lower()  # the underlying reason, e.g. "Couldn't connect to server"


def test_credentials_or_options_in_an_s3_store_path_are_refused_without_echoing_them(hydra_ctx, aws_env):
    """Credentials and the endpoint come from the AWS environment variables only, never the config."""
    message = refused("store.path='s3://AKIDEXAMPLE:TOPSECRETVALUE@bucket/store'")
    assert message.startswith("store.path: s3://<redacted>@bucket/store: credentials in the store path are refused")
    assert "TOPSECRETVALUE" not in message and "AKIDEXAMPLE" not in message
    message = refused("store.path='s3://bucket/store?endpoint_override=127.0.0.1:9&scheme=http'")
    assert "options in the store path are not read" in message and "AWS_ENDPOINT_URL" in message


def test_an_s3_store_without_credentials_is_refused_before_any_call(hydra_ctx, aws_env, closed_port):
    aws_env.delenv("AWS_SECRET_ACCESS_KEY")
    aws_env.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed_port}")  # a call would fail to connect
    message = refused("store.path=s3://bucket/store")
    assert message == (
        "store.path: s3://bucket/store: no credentials: AWS_SECRET_ACCESS_KEY is not set (the store reads "
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN from the environment only)"
    )


def test_an_endpoint_that_never_answers_costs_the_timeout_not_minutes(aws_env):
    """A server that accepts connections and never replies: the check gives up after timeout_s."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    port = silent.getsockname()[1]
    aws_env.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(StoreUnusable, match=r"no answer within 0\.5 s"):
            check_root("s3://bucket/store", timeout_s=0.5)
        # The event, not a stopwatch: the check gave up while its call was still waiting on the silent server.
        assert any(t.name == "shp-store-check" and t.is_alive() for t in threading.enumerate())
    finally:
        silent.close()  # the abandoned check now fails fast; let it end before pyarrow finalizes S3
        for worker in threading.enumerate():
            if worker.name == "shp-store-check":
                worker.join(60)


@pytest.fixture
def s3_server(aws_env):
    """A real S3 API on 127.0.0.1 (moto's server), found by pyarrow through AWS_ENDPOINT_URL."""
    server_mod = pytest.importorskip("moto.server")
    import pyarrow.fs as pafs

    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    aws_env.setenv("AWS_ENDPOINT_URL", endpoint)
    fs = pafs.S3FileSystem(endpoint_override=endpoint, allow_bucket_creation=True)
    fs.create_dir("shp-bucket")
    try:
        yield fs
    finally:
        server.stop()


def _objects(fs, bucket: str = "shp-bucket") -> list[str]:
    import pyarrow.fs as pafs

    return sorted(i.path for i in fs.get_file_info(pafs.FileSelector(bucket, recursive=True)))


def test_an_s3_store_in_an_existing_bucket_passes_and_leaves_nothing(hydra_ctx, s3_server):
    job = job_of("store.path=s3://shp-bucket/runs/store")
    assert job.store.uri == "s3://shp-bucket/runs/store"
    assert _objects(s3_server) == []  # the probe object was removed and no folder marker made


def test_a_missing_bucket_is_refused(hydra_ctx, s3_server):
    message = refused("store.path=s3://no-such-bucket/store")
    assert message.startswith("store.path: s3://no-such-bucket/store: bucket 'no-such-bucket' does not exist")


def test_an_s3_store_path_that_is_an_object_is_refused(hydra_ctx, s3_server):
    with s3_server.open_output_stream("shp-bucket/store") as out:
        out.write(b"not a folder")
    assert "is a file" in refused("store.path=s3://shp-bucket/store")
    assert "is a file" in refused("store.path=s3://shp-bucket/store/inner")
    assert _objects(s3_server) == ["shp-bucket/store"]


# --- the command line ----------------------------------------------------------------------------


def test_shp_sweep_with_a_file_as_store_exits_1_without_traceback_or_manifest(tmp_path):
    afile = tmp_path / "store"
    afile.write_text("mine")
    done = subprocess.run(
        [str(Path(sys.executable).parent / "shp-sweep"), "provider=sim", f"store.path={afile}", "dataset.limit=1"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "CI": "true", "RAY_USAGE_STATS_ENABLED": "0"},
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert f"shp-sweep: invalid config: store.path: {afile} is a file" in done.stderr
    assert "Traceback" not in out
    assert afile.read_text() == "mine"
    with contextlib.suppress(FileNotFoundError):
        assert not list((tmp_path / "runs").rglob("*.parquet"))
