"""``shp-sweep store.path=s3://...`` on Ray: the actors resolve the store from the AWS environment they inherit.

Apart from tests/test_store_s3.py because it is the slow one (~20-30 s: Hydra, Ray and its actors start).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage.parts import Store
from tests.s3_support import SECRET, moto, s3

pytestmark = pytest.mark.integration
__all__ = ["moto", "s3"]


def test_shp_sweep_on_ray_into_s3(s3, tmp_path) -> None:
    """The command line on Ray: actors resolve the store from the environment they inherit."""
    _, bucket = s3
    uri = f"s3://{bucket}/sweep"
    cmd = [
        str(Path(sys.executable).parent / "shp-sweep"), "provider=sim", "dataset.limit=2", "generation.max_rounds=2",
        "generation.embedder=fake-hash", "report.enabled=false", f"store.path={uri}", f"hydra.run.dir={tmp_path}/r",
    ]  # fmt: skip
    env = {**os.environ, "CI": "true", "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout + done.stderr
    assert "Traceback" not in out and SECRET not in out
    assert "2/2 trajectories, 2 generated now" in done.stdout and f"store:  {uri}" in done.stdout
    assert "is on object storage" in done.stdout + done.stderr  # where its caches and lock are kept
    assert len(Store(uri).parts("results")) == 1
