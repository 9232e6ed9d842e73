"""shp-sweep fails out loud: dead endpoints, refused keys, a server killed mid-run, lost scenarios.

Each case runs the real command (real Ray, real HTTP on 127.0.0.1, the real embedded llama.cpp
server) and checks the exit status, the one message and what the store holds afterwards.
"""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime

import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hydra import compose, initialize_config_module

import conf.schema  # noqa: F401
from conf.resolve import to_job
from shp_ray.providers.sim.server import SimServer
from storage import Store
from storage.schemas import FAILURES
from sweeps import job as sweep_job
from sweeps.job import snapshot
from tests.test_generation import _count
from tests.test_sweep import BIN, rounds_of, shp_sweep
from tests.test_your_loop import TASKS

# The shipped example tasks (one-line passages, ~150-token prompts): a HotpotQA prompt is ~600 tokens, 5-10 s a
# call on the tiny embedded model; the code under test is the same.
SHORT_TASKS = [
    "dataset=file", f"dataset.path={TASKS}", "dataset.fields.id=qid", "dataset.fields.question=prompt_text",
    "dataset.fields.contexts=passages", "dataset.fields.answers=gold", "dataset.limit=4",
]  # fmt: skip

pytestmark = pytest.mark.integration


def _dead(port: int) -> list[str]:
    return [
        "provider=openai",
        f"provider.base_url=http://127.0.0.1:{port}/v1",
        "provider.api_key_env=",
        "provider.model=m",
        "provider.timeout_s=5",
    ]


def test_a_dead_endpoint_fails_at_the_preflight_with_one_message(tmp_path, closed_port):
    store = tmp_path / "store"
    out = shp_sweep(*_dead(closed_port), "dataset.limit=2", f"store.path={store}")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAILED" in out.stderr and "preflight" in out.stderr and "is up and reachable" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert "policy" not in out.stdout  # no (empty) policy table printed as if the job had run
    assert not Store(store).parts("rounds")


def test_a_wrong_key_stops_the_job_after_one_call(tmp_path, monkeypatch):
    monkeypatch.setenv("SHP_TEST_SERVER_KEY", "the-right-key-1234")
    with SimServer(api_key_env="SHP_TEST_SERVER_KEY") as sim:
        out = shp_sweep(
            "provider=openai", f"provider.base_url={sim.base_url}", "provider.model=sim-model",
            "provider.api_key_env=SHP_TEST_CLIENT_KEY", "dataset.limit=3", f"store.path={tmp_path / 'store'}",
            env={"SHP_TEST_CLIENT_KEY": "a-wrong-key-5678"},
        )  # fmt: skip
        requests = sim.stats["requests"]
    assert out.returncode == 1, out.stdout + out.stderr
    assert "HTTP 401" in out.stderr and "check the API key" in out.stderr
    assert requests == 1  # one preflight call, never a scenario's retry budget
    assert "a-wrong-key-5678" not in out.stdout + out.stderr


def test_a_key_set_only_in_the_drivers_environment_of_a_joined_cluster_is_named_per_node(tmp_path, ray_address):
    """A run that joins a Ray started elsewhere: its actors read the environment that Ray started with, not the
    driver's. The driver's preflight passes; the workers' first call says where the variable is missing."""
    with SimServer() as sim:
        out = shp_sweep(
            "provider=openai", f"provider.base_url={sim.base_url}", "provider.model=sim-model",
            "provider.api_key_env=SHP_TEST_DRIVER_ONLY_KEY", "dataset.limit=2", "generation.max_rounds=2",
            "report.enabled=false", f"store.path={tmp_path / 'store'}", f"hydra.run.dir={tmp_path / 'run'}",
            f"ray.address={ray_address}", env={"SHP_TEST_DRIVER_ONLY_KEY": "a-key-only-here-5678"},
        )  # fmt: skip
        preflight = sim.stats["requests"]
    assert out.returncode == 1, out.stdout + out.stderr
    said = "environment variable SHP_TEST_DRIVER_ONLY_KEY is not set on this Ray node"
    assert said in out.stderr and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert preflight == 1 and "a-key-only-here-5678" not in out.stdout + out.stderr
    assert not Store(tmp_path / "store").parts("rounds")


def test_a_multirun_with_a_failed_job_exits_nonzero_after_running_every_job(tmp_path, closed_port):
    out = shp_sweep("-m", *_dead(closed_port), "dataset.limit=1,2", f"store.path={tmp_path / 'store'}")
    assert out.returncode != 0
    assert out.stderr.count("FAILED") >= 2, out.stderr  # both jobs ran and said why


def test_lost_scenarios_fail_the_job_unless_partial_results_are_accepted(tmp_path, monkeypatch, ray_session):
    store = tmp_path / "store"
    base = ["provider=sim", "generation.max_rounds=2", f"store.path={store}", "report.enabled=false"]

    def job(*extra: str):
        with initialize_config_module(config_module="conf", version_base="1.3"):
            cfg = compose(config_name="config", overrides=[*base, *extra])
        return to_job(cfg), snapshot(cfg)

    two, snap = job("dataset.limit=2")
    sweep_job.run(two, output_dir=tmp_path / "a", job_tag="a", config_snapshot=snap, command="t")
    # The third scenario failed for good in the generation (a recorded writer failure, no rounds);
    # the generation step is done, so this job goes straight to its check.
    three, snap = job("dataset.limit=3")
    scenarios = sweep_job.load_scenarios(three.dataset, split=three.split, limit=3)
    gen_id = three.generation.gen_id(three.provider.kind, three.provider.model)
    row = {"gen_id": gen_id, "scenario_id": scenarios[2].scenario_id, "round": 1, "stage": "writer"}
    row |= {"error_type": "ProviderError", "message": "http://h/v1: HTTP 500 after 9 attempt(s): boom"}
    Store(store).write("failures", pa.Table.from_pylist([row | {"created_at": datetime.now(UTC)}], schema=FAILURES))
    monkeypatch.setattr(sweep_job, "ensure_generation", lambda *a, **k: None)
    results_before = Store(store).read("results").num_rows

    with pytest.raises(sweep_job.JobFailed, match=r"1 of 3 scenarios .*1 x ProviderError: http://h/v1: HTTP 500: boom"):
        sweep_job.run(three, output_dir=tmp_path / "b", job_tag="b", config_snapshot=snap, command="t")
    assert Store(store).read("results").num_rows == results_before  # nothing half-reported

    partial, snap = job("dataset.limit=3", "allow_partial=true")
    result = sweep_job.run(partial, output_dir=tmp_path / "c", job_tag="c", config_snapshot=snap, command="t")
    assert (result.scenarios, result.trajectories) == (3, 2)


def test_killing_the_embedded_server_mid_run_fails_clearly_and_a_rerun_completes_exactly(tmp_path, ray_address):
    store = tmp_path / "store"
    args = [
        str(BIN / "shp-sweep"), *SHORT_TASKS, "generation.max_rounds=2", "generation.max_tokens=24",
        "generation.workers=1", "generation.concurrency=1", "report.enabled=false",
        f"store.path={store}", f"hydra.run.dir={tmp_path / 'run'}", f"ray.address={ray_address}",
    ]  # fmt: skip
    sweep = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # One trajectory at a time, 3 calls each: kill the server once the 4th call has completed,
        # i.e. with trajectory 1 done (held by the writer, not yet in a part) and trajectory 2 under way.
        deadline = time.monotonic() + 300
        while (
            _count(store / "_cache" / "responses.sqlite") < 4 and sweep.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        servers = [p for p in psutil.Process(sweep.pid).children(recursive=True) if p.name() == "llama-server"]
        assert len(servers) == 1, "the embedded server was not found while the sweep ran"
        servers[0].kill()
        stdout, stderr = sweep.communicate(timeout=300)
    finally:
        sweep.kill()
    assert sweep.returncode == 1, stdout + stderr
    assert "embedded llama.cpp server" in stderr and "killed by SIGKILL" in stderr, stderr
    assert "Rerun the same command" in stderr
    stored = rounds_of(store)
    first = set(stored["scenario_id"].to_pylist())
    assert 1 <= len(first) < 4  # the completed trajectories were kept, whole

    rerun = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "4/4 trajectories" in rerun.stdout
    rounds = rounds_of(store)
    pairs = list(zip(rounds["scenario_id"].to_pylist(), rounds["round"].to_pylist(), strict=True))
    assert len(pairs) == len(set(pairs)) == 4 * 2  # every round once: nothing duplicated, nothing lost
    assert pc.count_distinct(rounds["scenario_id"]).as_py() == 4
