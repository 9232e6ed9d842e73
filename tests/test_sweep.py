"""The Hydra app end to end on real parts: the simulated server over real HTTP, real Ray,
the real embedding model, the Parquet store and DuckDB, in-process and as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pyarrow.compute as pc
import pytest
from hydra import compose, initialize_config_module

import conf.schema  # noqa: F401
from conf.resolve import to_job
from shp_ray.providers.sim.server import SimServer
from storage import Store
from sweeps import job as sweep_job
from sweeps.job import snapshot
from tests.page_support import page_table

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
SMALL = ["dataset.limit=3", "generation.max_rounds=3", "generation.concurrency=4"]


def shp_sweep(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "shp-sweep"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "CI": "true", "RAY_USAGE_STATS_ENABLED": "0", **(env or {})},
    )


def shp_sweeps(*runs: list[str], env: dict[str, str] | None = None) -> list[subprocess.CompletedProcess]:
    """Several independent ``shp-sweep`` processes at once (each its own run folder and store; none starts Ray or
    a model): a config check is mostly the interpreter importing, one core each. As :func:`shp_sweep`, in order."""
    with ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda args: shp_sweep(*args, env=env), runs))


def shp_query_json(store: Path, query: str) -> list[dict]:
    q = subprocess.run(
        [str(BIN / "shp-query"), "--store", str(store), "--format", "json", query],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert q.returncode == 0, q.stderr
    return json.loads(q.stdout)


def rounds_of(store: Path):
    return Store(store).read("rounds", columns=["gen_id", "scenario_id", "round"])


def test_job_in_process_generates_once_then_replays_for_free(tmp_path, ray_session):
    store = tmp_path / "store"
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["provider=sim", *SMALL, f"store.path={store}"])
    job = to_job(cfg)
    first = sweep_job.run(job, output_dir=tmp_path / "a", job_tag="t1", config_snapshot=snapshot(cfg), command="t")
    assert (first.trajectories, first.generated, first.failed) == (3, 3, 0)
    assert first.generation_calls > 0
    assert rounds_of(store).num_rows == 3 * 3

    unreported = replace(job, report=replace(job.report, enabled=False))  # the first job's report is the one read
    again = sweep_job.run(
        unreported, output_dir=tmp_path / "b", job_tag="t2", config_snapshot=snapshot(cfg), command="t"
    )
    assert (again.generated, again.generation_calls) == (0, 0)  # zero generation calls on a rerun
    assert rounds_of(store).num_rows == 3 * 3

    results = Store(store).read("results")
    n_policies = len(job.policies)
    assert results.num_rows == 2 * n_policies * 3  # two jobs x every policy x three trajectories
    assert set(results["job"].to_pylist()) == {"t1", "t2"}
    assert set(results["policy"].to_pylist()) == {p.name for p in job.policies}
    assert pc.max(results["stop_round"]).as_py() <= 3

    report = Path(first.report).read_text()
    assert "simulated OpenAI-compatible server" in report and "not an LLM" in report
    assert Path(first.html) == Path(first.report).with_name("index.html") and Path(first.html).stat().st_size > 0

    # Switching the judge on a stored generation judges the stored drafts: no draft is regenerated.
    with initialize_config_module(config_module="conf", version_base="1.3"):
        overrides = ["provider=sim", "judge=llm", *SMALL, f"store.path={store}", "report.enabled=false"]
        llm_cfg = compose(config_name="config", overrides=overrides)
    llm = sweep_job.run(
        to_job(llm_cfg), output_dir=tmp_path / "c", job_tag="t3", config_snapshot=snapshot(llm_cfg), command="t"
    )
    assert (llm.generated, llm.generation_calls) == (0, 0)
    assert llm.judge != first.judge and "llm" in llm.judge.lower()
    judgments = Store(store).read("judgments")
    by_llm = judgments.filter(pc.equal(judgments["judge"], llm.judge))
    drafts = Store(store).read("rounds", columns=["scenario_id", "draft_hash"])
    distinct = set(zip(drafts["scenario_id"].to_pylist(), drafts["draft_hash"].to_pylist(), strict=True))
    assert by_llm.num_rows == len(distinct)
    assert all(0.0 <= v <= 1.0 for v in by_llm["faithfulness"].to_pylist())
    assert rounds_of(store).num_rows == 3 * 3
    manifests = Store(store).read("manifests")
    assert manifests.num_rows >= 2
    assert json.loads(manifests["config_json"][0].as_py())["provider"]["kind"] == "sim"


def test_ablation7_multirun_generates_once_and_replays_seven_cells(tmp_path, ray_address):
    store = tmp_path / "store"
    done = shp_sweep(
        "-m", "+sweep=ablation7", "provider=sim", *SMALL, f"store.path={store}",
        f"hydra.sweep.dir={tmp_path / 'multi'}", "report.enabled=false", f"ray.address={ray_address}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert rounds_of(store).num_rows == 3 * 3  # one generation shared by the seven jobs
    results = Store(store).read("results")
    assert sorted(set(results["policy"].to_pylist())) == sorted(
        ["abl_full", "abl_no_critic", "abl_no_entropy", "abl_no_gain", "abl_critic_only", "abl_entropy_only",
         "abl_gain_only"]
    )  # fmt: skip
    assert results.num_rows == 7 * 3
    assert done.stdout.count("0 generated now") == 6  # only the first job generated
    # One summary for the seven cells: one combined table (a row per cell), summary.md and summary.png.
    assert done.stdout.count("sweep summary: every job x policy") == 1
    table = done.stdout.split("sweep summary: every job x policy", 1)[1]
    assert sum(f"replay.policies=[{c}]" in table for c in ("abl_full", "abl_no_gain", "abl_gain_only")) == 3
    summary = (tmp_path / "multi" / "summary.md").read_text()
    assert summary.count("| replay.policies=[abl_") == 7 and (tmp_path / "multi" / "summary.png").stat().st_size

    # A rerun over the complete store replays all seven with zero generation calls: README example 3 (run by
    # test_docs) and the shipped store's grid (test_paper_store) show it.


def test_ray_launcher_runs_jobs_concurrently_and_generates_a_shared_generation_once(tmp_path):
    store = tmp_path / "store"
    done = shp_sweep(
        "-m", "hydra/launcher=ray", "provider=sim", *SMALL, f"store.path={store}", "halting.eps=0.04,0.06",
        "halting.k=1,2", "replay.policies=[shp,fixed_k3]", f"hydra.sweep.dir={tmp_path / 'multi'}",
        "report.enabled=false",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count(": done ->") == 4
    # A 2 x 2 eps x k grid: one summary in the sweep folder, one combined table (2 policies x 4 jobs).
    multi = tmp_path / "multi"
    assert sorted(p.name for p in multi.glob("summary.*")) == ["summary.html", "summary.md", "summary.png"]
    assert "`halting.eps` = 0.04, 0.06, `halting.k` = 1, 2" in (multi / "summary.md").read_text()
    assert done.stdout.count("sweep summary: every job x policy") == 1
    table = done.stdout.split("sweep summary: every job x policy", 1)[1]
    assert sum(line.startswith("halting.eps=") for line in table.splitlines()) == 2 * 4
    # The same rows are the sweep_summary view of shp-query, over the stored results.
    viewed = shp_query_json(store, "select job, policy, eps, k, n, token_saving, non_inferior from sweep_summary")
    assert sorted((r["eps"], r["k"], r["policy"]) for r in viewed) == sorted(
        (e, k, p) for e in (0.04, 0.06) for k in (1, 2) for p in ("shp", "fixed_k3")
    )
    assert all(r["n"] == 3 for r in viewed) and {r["token_saving"] for r in viewed if r["policy"] == "fixed_k3"} == {0}
    # The sweep's one page: its combined table is that view's rows (job, policy, tokens saved), one per job x policy.
    page = page_table((multi / "summary.html").read_text())
    said = {(tuple(sorted(dict(kv.split("=") for kv in r[0].split()).items())), r[1].removesuffix(" (test)"), r[2])
            for r in page[1:]}  # fmt: skip
    assert page[0][:3] == ["job", "policy", "saved"] and len(page) - 1 == len(viewed) == len(said)
    assert said == {((("halting.eps", f"{r['eps']:g}"), ("halting.k", str(r["k"]))), r["policy"],
                     format(r["token_saving"], ".0%")) for r in viewed}  # fmt: skip
    rows = rounds_of(store)
    keys = {
        (g, s, r) for g, s, r in zip(*(rows[c].to_pylist() for c in ("gen_id", "scenario_id", "round")), strict=True)
    }
    assert rows.num_rows == len(keys) == 3 * 3  # no duplicate rows: generated once under the lock
    assert Store(store).read("generations").num_rows == 1
    results = Store(store).read("results")
    assert sorted(set(results["eps"].to_pylist())) == [0.04, 0.06]


def test_openai_provider_journey_and_shp_query(tmp_path):
    store = tmp_path / "store"
    secret = "sk-test-0123456789abcdefSECRET"
    env = {"SHP_TEST_KEY": secret}
    os.environ["SHP_TEST_KEY"] = secret  # the in-process server checks the same variable
    try:
        with SimServer(api_key_env="SHP_TEST_KEY", models=("m-1",)) as sim:
            done = shp_sweep(
                "provider=openai", f"provider.base_url={sim.base_url}", "provider.model=m-1",
                "provider.api_key_env=SHP_TEST_KEY", "provider.rpm=6000", "judge=lexical", *SMALL,
                f"store.path={store}", f"hydra.run.dir={tmp_path / 'run'}",
                env=env,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-3000:]
            assert sim.stats["requests"] > 0
    finally:
        del os.environ["SHP_TEST_KEY"]
    assert "3/3 trajectories" in done.stdout
    # The key is never written anywhere: store, run folder, output.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in done.stdout + done.stderr

    rows = shp_query_json(store, "select policy, avg(stop_round) as r from replay group by policy")
    by_policy = {r["policy"]: r["r"] for r in rows}
    assert by_policy["fixed_k1"] == 1.0 and by_policy["fixed_k3"] == 3.0
    assert 1.0 <= by_policy["shp"] <= 3.0


def test_a_typo_fails_before_any_call(tmp_path):
    store = tmp_path / "store"
    done = shp_sweep("provider=sim", "provider.bse_url=http://x", f"store.path={store}")
    assert done.returncode != 0
    assert "bse_url" in done.stderr
    bad = shp_sweep("provider=sim", "halting.eps=5", f"store.path={store}", f"hydra.run.dir={tmp_path / 'r'}")
    assert bad.returncode != 0 and "halting" in bad.stderr and "eps" in bad.stderr
    assert not store.exists()  # nothing written, no server started, no call made


def test_halting_eps_and_ray_num_cpus_reach_where_they_act(tmp_path):
    """Two keys that used to be validated and then dropped: eps never reached the report (it always
    said 0.06), ray.num_cpus never reached Ray."""
    store = tmp_path / "store"
    overrides = ["provider=sim", "dataset.limit=2", "generation.max_rounds=2", f"store.path={store}"]
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*overrides, "halting.eps=0.031", "ray.num_cpus=1"])
    job = to_job(cfg)
    scenarios = sweep_job.load_scenarios(job.dataset, split=job.split, limit=job.limit)
    summary = sweep_job.ensure_generation(job, job.store, scenarios, "run-1", "t")
    assert summary is not None and summary.generated == 2 and summary.ray_cpus == 1
    result = sweep_job.run(job, output_dir=tmp_path / "out", job_tag="t", config_snapshot=snapshot(cfg), command="t")
    report = Path(result.report).read_text()
    assert "below eps = 0.031" in report and "below eps = 0.06" not in report
