"""A Ray cluster already on the machine is not the run's unless ``ray.address`` names it.

``ray start --head`` records its address in Ray's temp folder (``ray_current_cluster``), and a bare
``ray.init()`` joins whatever is recorded there. The head here is a real one, started in a temp folder
of the test's own (``RAY_TMPDIR``, so no other Ray on the machine is touched), and stopped by killing
the processes of its own session -- never ``ray stop``, which stops every cluster of the machine.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from hydra import compose, initialize_config_module

import conf.schema  # noqa: F401
from conf.resolve import to_job
from shp_ray.generation import generate as generate_module
from shp_ray.generation.cluster import RayUnavailable
from storage import Store
from sweeps import job as sweep_job
from sweeps.job import snapshot
from tests.test_sweep import BIN

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Head:
    ray_tmpdir: Path  # what RAY_TMPDIR must be for a run to find the head's record
    address: str
    session: Path  # the head's own session folder: its logs, and what its processes' command lines name


def _session_processes(session: Path) -> list[psutil.Process]:
    """The head's processes (their command lines name its session folder) and their children."""
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if proc.pid != os.getpid() and str(session) in " ".join(proc.info["cmdline"] or []):
                found[proc.pid] = proc
                found.update({c.pid: c for c in proc.children(recursive=True)})
        except psutil.Error:
            continue
    return list(found.values())


def _stop(procs: list[psutil.Process]) -> None:
    """SIGKILL, as ``ray stop --force`` does: the head is the test's own and keeps nothing (asked to terminate,
    one of its processes outlived a 15 s wait on every run)."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=30)


@pytest.fixture
def foreign_head() -> Iterator[Head]:
    """A Ray head started with ``ray start --head`` in a temp folder of this test's own (short: Ray's
    socket paths are limited), its processes killed in teardown whatever happened."""
    base = Path(tempfile.mkdtemp(prefix="h4ray", dir="/tmp"))
    temp = base / "ray"  # Ray looks for ray_current_cluster in $RAY_TMPDIR/ray
    env = {**os.environ, "RAY_TMPDIR": str(base), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    cmd = [
        str(BIN / "ray"), "start", "--head", f"--temp-dir={temp}", f"--port={_free_port()}", "--num-cpus=1",
        "--include-dashboard=false", f"--dashboard-port={_free_port()}",
        f"--dashboard-agent-listen-port={_free_port()}", "--disable-usage-stats",
    ]  # fmt: skip
    started = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=base)
    session = (temp / "session_latest").resolve()
    procs = _session_processes(session) if session.name.startswith("session_") else []
    try:
        assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
        recorded = (temp / "ray_current_cluster").read_text().strip()
        yield Head(base, recorded, session)
    finally:
        _stop(procs + [p for p in _session_processes(session) if p.pid not in {q.pid for q in procs}])
        subprocess.run(["rm", "-rf", str(base)], check=False)


def _drivers(session: Path) -> list[str]:
    """The drivers that joined the cluster: each leaves a python-core-driver log in its session."""
    return sorted(p.name for p in (session / "logs").glob("python-core-driver-*"))


def test_a_default_run_starts_its_own_ray_beside_a_recorded_cluster(foreign_head, tmp_path):
    store = tmp_path / "store"
    env = {**os.environ, "CI": "true", "RAY_TMPDIR": str(foreign_head.ray_tmpdir), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run(
        [
            str(BIN / "shp-sweep"), "provider=sim", "dataset.limit=2", "generation.max_rounds=2",
            "report.enabled=false", f"store.path={store}", f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "2/2 trajectories, 2 generated now" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    assert _drivers(foreign_head.session) == []  # the recorded cluster was not joined
    assert len(Store(store).parts("manifests")) == 2  # the generation's row and the job's


def test_a_ray_that_does_not_start_records_no_manifest_row(tmp_path, monkeypatch):
    # A real Ray that refuses to start takes minutes to say so (a dead GCS address is retried for
    # 5 min): the refusal is injected where Ray is started, the rest of the job is real.
    def refuse(address=None, num_cpus=2):
        raise RayUnavailable(f"ray.address={address}: could not join the cluster: refused for the test")

    monkeypatch.setattr(generate_module, "start_ray", refuse)
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["provider=sim", "dataset.limit=1", f"store.path={tmp_path}/s"])
    job = to_job(cfg)
    with pytest.raises(RayUnavailable, match="refused for the test"):
        sweep_job.run(job, output_dir=tmp_path / "out", job_tag="t", config_snapshot=snapshot(cfg), command="t")
    assert Store(tmp_path / "s").parts("manifests") == []
