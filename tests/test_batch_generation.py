"""Batch mode (provider.batch=true) against shp-serve's Batch API on 127.0.0.1: the lockstep makes one
batch per step, the stored trajectories equal live mode's, failed lines are retried then sent live,
a kill -9 mid-batch resumes without creating any batch twice, and judging goes in batches too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from shp_ray.generation.datasets import load_scenarios
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.generation.lockstep import SUBMISSION_KEY, open_lockstep, still_running, submission_key
from shp_ray.generation.rejudge import judge_stored
from shp_ray.providers.base import ChatRequest, ProviderSpec
from shp_ray.providers.batch_api import BatchAPI
from shp_ray.providers.batch_files import request_line
from shp_ray.providers.sim.server import SimServer
from storage.batch_ledger import BATCHES_FILE, BatchLedger
from storage.parts import Store

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
# Everything a round row holds but the wall time it took (a batch's lines carry none of their own).
SAME = ["gen_id", "scenario_id", "round", "draft", "feedback", "draft_hash", "writer_prompt_tokens",
        "writer_completion_tokens", "critic_prompt_tokens", "critic_completion_tokens", "embedding"]  # fmt: skip


def _spec(sim: SimServer, **batch: object) -> ProviderSpec:
    return ProviderSpec(kind="sim", base_url=sim.base_url, model="sim-model", **batch)  # type: ignore[arg-type]


def _rounds(root: Path) -> list[dict]:
    """The rows in key order, the embedding to 1e-5 (an encoder's batch shapes move its 7th digit)."""
    rows = Store(root).read("rounds").select(SAME).to_pylist()
    for r in rows:
        r["embedding"] = Approx(r["embedding"])
    return sorted(rows, key=lambda r: (r["scenario_id"], r["round"]))


class Approx:
    def __init__(self, vector: list[float]) -> None:
        self.vector = np.asarray(vector)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Approx) and np.allclose(self.vector, other.vector, atol=1e-5)

    def __repr__(self) -> str:
        return f"Approx({self.vector[:3]}...)"


def _live_reference(tmp_path: Path, scenarios: list, cfg: GenerationConfig) -> list[dict]:
    with SimServer() as sim:
        generate(scenarios, cfg, Store(tmp_path / "live"), _spec(sim), RunOptions(backend="local", progress=False))
    return _rounds(tmp_path / "live")


def test_batch_mode_on_ray_stores_what_live_mode_stores(tmp_path, ray_session) -> None:
    scenarios = load_scenarios("shp_paper", limit=20)
    cfg = GenerationConfig(max_rounds=4, workers=2, flush_every=8)
    live = _live_reference(tmp_path, scenarios, cfg)
    with SimServer(batch_delay_s=0.05) as sim:
        s = generate(
            scenarios,
            cfg,
            Store(tmp_path / "batch"),
            _spec(sim, batch=True, batch_poll_s=0.05),
            RunOptions(progress=False),
        )
        stats = sim.stats
    assert (s.generated, s.failed) == (20, 0)
    # Lockstep: 4 Writer steps + 3 Critic steps, one batch each, whatever N; no live chat call at all.
    assert stats["batch"]["batches_created"] == 7 and s.batch["steps"] == 7 and s.batch["live_fallbacks"] == 0
    assert stats["requests"] == 0 and stats["batch"]["lines_ok"] == 20 * 7
    assert set(stats["batch"]["ok_by_custom_id"].values()) == {1}  # each call paid once
    assert _rounds(tmp_path / "batch") == live and len(live) == 80


def test_failed_lines_go_in_the_next_batch_then_live(tmp_path) -> None:
    scenarios = load_scenarios("shp_paper", limit=8)
    cfg = GenerationConfig(max_rounds=3, embedder="fake-hash")
    live = _live_reference(tmp_path, scenarios, cfg)
    with SimServer(batch_fault_rate=0.3, batch_malformed_rate=0.1) as sim:
        spec = _spec(sim, batch=True, batch_poll_s=0.02, batch_max_tries=2)
        s = generate(scenarios, cfg, Store(tmp_path / "batch"), spec, RunOptions(backend="local", progress=False))
        stats = sim.stats
    b = s.batch
    assert s.generated == 8 and b["batch_failed_lines"] > 0 and b["live_fallbacks"] > 0
    assert b["batch_completed"] + b["live_fallbacks"] == 8 * 5  # every call answered exactly once
    assert stats["ok"] == b["live_fallbacks"]  # the live endpoint saw only the fallbacks
    # A failed line is not paid. A line the server answered but wrote malformed was paid and cannot be
    # read: only those are paid again (nothing else is answered twice, by batch or live).
    paid = stats["batch"]["ok_by_custom_id"]
    assert stats["batch"]["malformed_lines"] > 0
    assert sum(n - 1 for n in paid.values()) <= stats["batch"]["malformed_lines"]
    assert len(paid) + stats["ok"] >= 8 * 5
    assert _rounds(tmp_path / "batch") == live
    # each stored call says how it was paid: the live fallbacks live, every other call batch
    rounds = Store(tmp_path / "batch").read("rounds").to_pylist()
    calls = [r["writer_mode"] for r in rounds] + [r["critic_mode"] for r in rounds if r["round"] < 3]
    assert calls.count("live") == b["live_fallbacks"] and calls.count("batch") == b["batch_completed"]


_GENERATE = """
import json, sys
from shp_ray.generation.datasets import load_scenarios
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.providers.base import ProviderSpec
from storage.parts import Store

store, base_url = Store(sys.argv[1]), sys.argv[2]
cfg = GenerationConfig(max_rounds=4, embedder="fake-hash")
spec = ProviderSpec(kind="sim", base_url=base_url, model="sim-model", batch=True, batch_poll_s=0.05)
summary = generate(load_scenarios("shp_paper", limit=12), cfg, store, spec, RunOptions(backend="local"))
print(json.dumps(summary.to_dict()))
"""


def _kill_tree(proc: subprocess.Popen) -> None:
    family = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
    for pid in family:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(30)


def test_kill_minus_9_mid_batch_then_rerun_creates_no_batch_twice(tmp_path) -> None:
    store_dir = tmp_path / "store"
    live = _live_reference(tmp_path, load_scenarios("shp_paper", limit=12), GenerationConfig(max_rounds=4,
                           embedder="fake-hash"))  # fmt: skip
    env = {**os.environ, "CI": "true"}
    with SimServer(batch_delay_s=0.4) as sim:
        cmd = [sys.executable, "-c", _GENERATE, str(store_dir), sim.base_url]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120

        def third_batch_recorded() -> bool:  # created at the server AND its id in the run's ledger
            return sim.stats["batch"]["batches_created"] >= 3 and still_running(store_dir / "_cache") != ""

        # Kill while the third batch is at the server, before it finishes (it takes >= 3 x 0.4 s there), once the
        # run has recorded it: the server counts a batch before its create call returns to the run.
        while not third_batch_recorded() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        _kill_tree(proc)
        proc.stderr.close()
        created = sim.stats["batch"]["batches_created"]
        assert created == 3 and sum(sim.stats["batch"]["batches_final"].values()) < 3
        told = still_running(store_dir / "_cache")
        assert "still at the provider" in told and "Rerun the same command" in told

        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        summary = json.loads(out.stdout.strip().splitlines()[-1])
        stats = sim.stats
    assert summary["batch"]["batches_adopted"] == 1  # the killed run's in-flight batch, polled again
    assert stats["batch"]["batches_created"] == 7  # 2 x 4 - 1 steps: none created twice
    assert set(stats["batch"]["ok_by_custom_id"].values()) == {1} and stats["requests"] == 0
    assert _rounds(store_dir) == live
    assert still_running(store_dir / "_cache") == ""
    assert not list((store_dir / "_cache" / "batch-files").glob("*.jsonl"))  # taken in, then dropped


def test_a_batch_created_just_before_a_kill_is_found_by_its_key(tmp_path) -> None:
    """The one window the ledger cannot close alone: create returned, the id was never recorded."""
    request = ChatRequest(model="sim-model", messages=(("system", "You are the Writer."), ("user", "Round: 1\nQ")))
    cid = request.cache_key()
    with SimServer(batch_delay_s=0.05) as sim:
        spec = _spec(sim, batch=True, batch_poll_s=0.02)
        key = submission_key("generation", [cid], 0)
        ledger = BatchLedger(tmp_path / BATCHES_FILE)
        ledger.intend(key, "generation", [cid])  # what a run records before its create call ...

        async def created_then_killed() -> None:
            async with BatchAPI(spec) as api:
                await api.submit([request_line(cid, request)], metadata={SUBMISSION_KEY: key})

        asyncio.run(created_then_killed())  # ... and the create that reached the server
        ledger.close()

        async def rerun() -> str:
            lockstep = open_lockstep(spec, tmp_path, role="generation", live=None, metadata={})
            lockstep.expect(1)
            try:
                return (await lockstep.complete(request)).content
            finally:
                await lockstep.aclose()

        content = asyncio.run(rerun())
        assert sim.stats["batch"]["batches_created"] == 1 and content


def test_judging_in_batches_scores_what_live_judging_scores(tmp_path) -> None:
    scenarios = load_scenarios("shp_paper", limit=6)
    gen = GenerationConfig(max_rounds=3, embedder="fake-hash", judge="none")
    judged = {}
    with SimServer(batch_delay_s=0.05) as sim:
        for mode in ("live", "batch"):
            root = tmp_path / mode
            generate(scenarios, gen, Store(root), _spec(sim), RunOptions(backend="local", progress=False))
            cfg = GenerationConfig(max_rounds=3, embedder="fake-hash", judge="llm", judge_batch=mode == "batch")
            spec = _spec(sim, batch_poll_s=0.02)
            gen_id = gen.gen_id("sim", "sim-model")
            before = sim.stats["batch"]["batches_created"]
            n = judge_stored(Store(root), gen_id, scenarios, cfg, spec, root / "_cache", judge="llm:sim-model")
            batches = sim.stats["batch"]["batches_created"] - before
            assert n == 18 and batches == (1 if mode == "batch" else 0)
            rows = Store(root).read("judgments").to_pylist()
            assert {r.pop("judge_mode") for r in rows} == {mode}  # each judgment priced as it was paid
            judged[mode] = sorted(rows, key=lambda r: (r["scenario_id"], r["draft_hash"]))
    assert judged["batch"] == judged["live"]


def test_shp_query_lists_and_cancels_what_a_stopped_run_left_at_the_provider(tmp_path, capsys) -> None:
    from analysis import query

    request = ChatRequest(model="sim-model", messages=(("system", "You are the Writer."), ("user", "Round: 1\nQ")))
    store = tmp_path / "store"
    with SimServer(batch_delay_s=30) as sim:  # a batch that stays at the provider

        async def stopped_run() -> None:
            lockstep = open_lockstep(
                _spec(sim, batch=True), store / "_cache", role="generation", live=None, metadata={}
            )
            lockstep.expect(1)
            task = asyncio.ensure_future(lockstep.complete(request))
            while sim.stats["batch"]["batches_created"] == 0:
                await asyncio.sleep(0.02)
            task.cancel()  # the run stops; its batch runs on
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await lockstep.aclose()

        asyncio.run(stopped_run())
        assert query.main(["--store", str(store), "--batches"]) == 0
        listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert len(listed) == 1 and listed[0]["taken"] is False and listed[0]["endpoint"] == sim.base_url
        assert query.main(["--store", str(store), "--batches", "cancel"]) == 0
        out = json.loads(capsys.readouterr().out.splitlines()[0])
        assert out["cancelled"] is True and out["status"] in ("cancelling", "cancelled")
