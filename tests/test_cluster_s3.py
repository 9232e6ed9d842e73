"""Both halves of "outgrow one machine" at once, as a user runs them: ``shp-sweep`` on a 2-node local
Ray cluster (``ray.cluster_utils.Cluster``: a head and one worker node) with its store on a real
S3-compatible server (moto on 127.0.0.1); the worker node is killed (SIGKILL, all its processes)
mid-generation. The job ends exact on the head, a rerun pays nothing, ``shp-query --store s3://...``
answers. The simulated server in this process counts every paid call.

The AWS variables are set before the cluster starts: a node's actors read the credentials from the
environment their raylet was started with (on a real cluster: every node's), never from the job.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shp_ray.generation.datasets import load_scenarios
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.generation.prompts import PromptSet
from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.sim.server import SimServer
from storage.parts import Store
from tests.cluster_support import local_cluster
from tests.s3_support import SECRET, aws, moto
from tests.test_cluster import SAME, _rows, _unique

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray-clusters")]  # see conftest.SHARED_FIXTURE_GROUPS
__all__ = ["aws", "moto"]
ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
N, ROUNDS = 8, 3


@pytest.fixture(scope="module")
def cluster(aws):
    with local_cluster(workers=1) as c:
        yield c


def _sweep(uri: str, base_url: str, address: str, run_dir: Path) -> subprocess.Popen:
    cmd = [
        str(BIN / "shp-sweep"), "provider=sim", f"provider.base_url={base_url}", f"dataset.limit={N}",
        f"generation.max_rounds={ROUNDS}", "generation.embedder=fake-hash", "generation.workers=2",
        "generation.concurrency=2", f"ray.address={address}",
        f"store.path={uri}", f"hydra.run.dir={run_dir}", "report.enabled=false",
    ]  # fmt: skip
    env = {**os.environ, "CI": "true"}
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_sweep_on_two_nodes_into_s3_survives_a_node_kill_and_ends_exact(aws, cluster, tmp_path) -> None:
    uri = f"s3://{aws}/cluster-run"
    calls = N * (2 * ROUNDS - 1)
    killed: dict[str, int] = {}
    with SimServer(latency_s=0.3) as sim:
        proc = _sweep(uri, sim.base_url, cluster.address, tmp_path / "run")

        def kill_at_a_third_of_the_calls() -> None:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and proc.poll() is None and sim.stats["ok"] < calls // 3:
                time.sleep(0.05)
            killed["at_calls"] = sim.stats["ok"]
            cluster.remove_node(cluster.workers[0], allow_graceful=False)

        killer = threading.Thread(target=kill_at_a_third_of_the_calls, daemon=True)
        killer.start()
        out, err = proc.communicate(timeout=600)
        killer.join(60)
        paid, repeated, unread = sim.stats["ok"], sim.stats["ok_repeated"], sim.stats["ok_unread"]
        assert proc.returncode == 0, (out + err)[-3000:]
        assert SECRET not in out + err and "Traceback" not in out + err
        assert killed and calls // 3 <= killed["at_calls"] < calls, f"the node was not killed mid-run: {killed}"
        assert f"{N}/{N} trajectories, {N} generated now" in out, out[-2000:]
        lost = re.search(r"(\d+) workers lost with their node, (\d+) trajectories run again", out)
        assert lost and int(lost.group(1)) >= 1, out[-2000:]
        resubmitted = int(lost.group(2))

        # A rerun of the same command on the surviving head: nothing generated, no call paid again.
        again = _sweep(uri, sim.base_url, cluster.address, tmp_path / "rerun")
        out2, err2 = again.communicate(timeout=600)
        assert again.returncode == 0, (out2 + err2)[-3000:]
        assert f"{N}/{N} trajectories, 0 generated now" in out2 and sim.stats["ok"] == paid

    # Exact: the rows equal the same generation run in one process against a fresh simulated server.
    (gen,) = Store(uri).read("generations").to_pylist()
    stored = json.loads(gen["config_json"])["generation"]
    cfg = GenerationConfig(**{**stored, "prompts": PromptSet(**stored["prompts"])})
    scenarios = load_scenarios("hotpotqa", split="test", limit=N)
    with SimServer(latency_s=0.0) as ref_sim:
        spec = ProviderSpec(kind="sim", base_url=ref_sim.base_url, model=gen["model"])
        s = generate(scenarios, cfg, Store(tmp_path / "ref"), spec, RunOptions(backend="local", progress=False))
        ref_paid = ref_sim.stats["ok"]
    assert (s.generated, s.failed) == (N, 0) and ref_paid == calls
    got = _rows(uri)
    assert len(got) == N * ROUNDS and _unique(got, "gen_id", "scenario_id", "round")
    assert got == _rows(tmp_path / "ref", cols=SAME)
    # Paid twice (the server counts replies to a request it had answered before): at most the calls in
    # flight on the dead node, one per trajectory running there. The one other call is the job's preflight.
    assert paid == ref_paid + 1 + repeated and repeated <= resubmitted, (paid, ref_paid, repeated, unread, resubmitted)

    query = subprocess.run(
        [str(BIN / "shp-query"), "--store", uri, "SELECT count(DISTINCT scenario_id) AS n, count(*) AS r FROM rounds"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "CI": "true"},
    )  # fmt: skip
    assert query.returncode == 0, query.stderr[-2000:]
    assert re.search(rf"\b{N}\b.*\b{N * ROUNDS}\b", query.stdout), query.stdout
    assert SECRET not in query.stdout + query.stderr
