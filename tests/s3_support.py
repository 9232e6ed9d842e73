"""The S3 fixtures of the object-store tests: moto's real S3 server on 127.0.0.1, the AWS environment set."""

from __future__ import annotations

import logging
import uuid

import pyarrow.fs as pafs
import pytest

SECRET = "S3CR3T-" + uuid.uuid4().hex  # the secret key: must never appear in a message, a log or a manifest


@pytest.fixture(scope="module")
def moto():
    """One moto server for the module, on a free port of 127.0.0.1."""
    server_mod = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


DROPPED = ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION")


def set_aws_env(mp: pytest.MonkeyPatch, endpoint: str, cache_home: str) -> tuple[pafs.S3FileSystem, str]:
    """The AWS environment of a test (dummy keys, the moto endpoint, a local state folder), and a fresh bucket
    with a filesystem on the server."""
    for name in DROPPED:
        mp.delenv(name, raising=False)
    mp.setenv("AWS_ACCESS_KEY_ID", "AKIDTESTING")
    mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    mp.setenv("AWS_REGION", "us-east-1")
    mp.setenv("AWS_ENDPOINT_URL", endpoint)
    mp.setenv("XDG_CACHE_HOME", cache_home)  # the remote store's local side files
    mp.delenv("SHP_RAY_CACHE", raising=False)  # (which it would take before XDG_CACHE_HOME)
    bucket = f"shp-{uuid.uuid4().hex[:10]}"
    fs = pafs.S3FileSystem(
        access_key="AKIDTESTING", secret_key=SECRET, endpoint_override=endpoint, allow_bucket_creation=True
    )
    fs.create_dir(bucket)
    return fs, bucket


@pytest.fixture
def s3(moto, monkeypatch, tmp_path):
    """One test's AWS environment and fresh bucket (set_aws_env)."""
    return set_aws_env(monkeypatch, moto, str(tmp_path / "xdg"))


@pytest.fixture(scope="module")
def aws(moto, tmp_path_factory):
    """The AWS environment for a whole module (a local Ray cluster's raylets, started after it, inherit it) and a
    fresh bucket (set_aws_env)."""
    with pytest.MonkeyPatch.context() as mp:
        _, bucket = set_aws_env(mp, moto, str(tmp_path_factory.mktemp("xdg")))
        yield bucket
