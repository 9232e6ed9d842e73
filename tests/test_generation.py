"""Generation on real Ray against the simulated server (shp-serve, 127.0.0.1) with the real
embedding model; and kill -9 mid-run, then resume: exact rows, no duplicates, no repeated paid call."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow.compute as pc
import pytest

import analysis
from analysis.replay import signals_store
from shp_ray.generation.datasets import load_scenarios, with_epochs
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.policy.answer import qa_answer
from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.sim.server import SimServer
from storage.parts import Store
from tests.cluster_support import same_summary

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]


def _unique(table, *cols) -> bool:
    keys = list(zip(*(table[c].to_pylist() for c in cols), strict=True))
    return len(keys) == len(set(keys))


@pytest.mark.integration
def test_a_model_that_cannot_embed_stops_the_run_before_anything_is_written(tmp_path, ray_session) -> None:
    """The writer and workers start while the model loads (its size read from its folder): a folder that looks
    right but whose weights are damaged still ends the run with one message, before any call or store row."""
    import shutil

    from shp_ray.generation.embedder import resolve_model
    from shp_ray.generation.guard import GenerationAborted

    model = tmp_path / "model"
    shutil.copytree(resolve_model("default"), model)
    (model / "model.safetensors").write_bytes(b"not a safetensors file")
    cfg = GenerationConfig(max_rounds=2, embedder=str(model))
    with SimServer() as sim:
        spec = ProviderSpec(kind="sim", base_url=sim.base_url, model="sim-model")
        with pytest.raises(GenerationAborted, match="could not embed a text") as err:
            generate(
                load_scenarios("shp_paper", limit=2), cfg, Store(tmp_path / "store"), spec, RunOptions(progress=False)
            )
        assert sim.stats["requests"] == 0
    said = str(err.value)
    assert str(model) in said and "Nothing was generated" in said
    assert "Traceback" not in said and len(said.splitlines()) == 1  # what the model raised, not Ray's traceback
    store = Store(tmp_path / "store")
    assert not store.parts("generations") and not store.parts("rounds")


def test_runs_at_once_on_one_ray_each_keep_their_embedding_actor(tmp_path, ray_session) -> None:
    """Two runs on one Ray at the same time (a Ray-launcher multirun over two models): both models load (neither
    waits for CPUs the other reserved), the first one to end stops the actors it started, and the other one
    still embeds, and still counts what it embedded."""
    from shp_ray.generation.cluster import driver_node, live_nodes
    from shp_ray.generation.node_services import start_services
    from shp_ray.generation.services import DEFAULT_FACTORY

    driver = driver_node()
    nodes, cfg = live_nodes(driver), GenerationConfig(embedder="fake-hash", judge="none")  # 2 threads each
    spec = ProviderSpec(kind="sim", base_url="http://127.0.0.1:9/v1", model="sim-model")
    first, second = (start_services(nodes, driver, cfg, spec, DEFAULT_FACTORY, str(tmp_path / n)) for n in "ab")
    try:
        loading = [*first.loading.values(), *second.loading.values()]
        done, _ = ray_session.wait(loading, num_returns=len(loading), timeout=120)  # a reserved CPU: forever
        assert len(done) == 2, "an embedding actor never started"
        first.ready()
        second.ready()
        for actor in first.owned:  # the first run ends (ray_run kills what it started)
            ray_session.kill(actor)
        vector = ray_session.get(second.nodes[driver].embed.embed.remote("a draft of the second run"), timeout=60)
        assert vector.shape == (second.dim,)
        assert second.embedded_texts() == 1
    finally:
        for actor in second.owned:
            ray_session.kill(actor)


def test_generation_on_ray_with_sim_server_and_real_embedder(tmp_path, ray_session) -> None:
    scenarios = load_scenarios("shp_paper", limit=5)
    cfg = GenerationConfig(max_rounds=3, judge="llm", workers=2, concurrency=4, flush_every=2)
    with SimServer(latency_s=0.01) as sim:
        spec = ProviderSpec(kind="sim", base_url=sim.base_url, model="sim-model")
        s = generate(scenarios, cfg, Store(tmp_path / "store"), spec, RunOptions(progress=False))
        paid = sim.stats["ok"]
        again = generate(scenarios, cfg, Store(tmp_path / "store"), spec, RunOptions(progress=False))
        assert sim.stats["ok"] == paid  # the rerun found everything stored: no call at all
    assert (s.generated, s.failed, s.skipped) == (5, 0, 0)
    assert (again.generated, again.skipped) == (0, 5)
    # 5 x (3 writer + 2 critic + 3 judge) paid calls, each once.
    assert paid == 5 * 8 and s.calls == 40 and s.embedded_texts == 15
    store = Store(tmp_path / "store")
    rounds = store.read("rounds")
    assert rounds.num_rows == 15 and _unique(rounds, "gen_id", "scenario_id", "round")
    emb = np.stack(rounds["embedding"].to_numpy(zero_copy_only=False))
    assert emb.shape == (15, 384) and np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    last = rounds.filter(pc.equal(rounds["round"], 3))
    assert set(last["feedback"].to_pylist()) == {""}
    assert all(f for f in rounds.filter(pc.less(rounds["round"], 3))["feedback"].to_pylist())
    assert min(rounds["writer_completion_tokens"].to_pylist()) > 0
    judgments = store.read("judgments")
    assert judgments.num_rows == 15 and _unique(judgments, "judge_key")
    assert set(judgments["judge"].to_pylist()) == {"llm:sim-model"} and set(judgments["error"].to_pylist()) == {""}
    assert min(judgments["judge_prompt_tokens"].to_pylist()) > 0
    gens = store.read("generations").to_pylist()
    assert len(gens) == 1 and gens[0]["embedder"].startswith("all-MiniLM-L6-v2") and gens[0]["gen_id"] == s.gen_id
    assert store.read("scenarios").num_rows == 5 and store.read("manifests").num_rows == 2
    # Each trajectory's signals were written beside its rounds, equal to what its rounds give.
    signals = store.read("signals")
    assert signals.num_rows == 15 and _unique(signals, "gen_id", "scenario_id", "round")
    checked = signals_store.check(store)
    assert (checked.checked_rows, checked.different_rows, checked.unstored) == (15, 0, 0)
    # Each draft's answer was read by the task's own extractor (QA) and stored once, beside its scores.
    drafts = {(r["scenario_id"], r["round"]): r["draft"] for r in rounds.to_pylist()}
    answers = store.read("draft_answers").to_pylist()
    assert len(answers) == 15 and {r["extractor"] for r in answers} == {"qa-lenient-v1"}
    assert all(r["answer"] == qa_answer(drafts[(r["scenario_id"], r["round"])]) for r in answers)
    con = analysis.connect(store.path)
    assert analysis.setup_of(con).signals == "stored"  # opening it reads no embedding
    con.close()


def _proc(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def _count(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(str(path), timeout=5) as conn:
            return int(conn.execute("SELECT count(*) FROM responses").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


# A generation in its own process (to be killed): the Python API, the summary printed as one JSON line.
_GENERATE = """
import json, sys
import analysis
from analysis.replay import signals_store
from shp_ray.generation.datasets import load_scenarios, with_epochs
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.providers.base import ProviderSpec
from storage.parts import Store

store, base_url, n, epochs = Store(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cfg = GenerationConfig(max_rounds=3, embedder="fake-hash", workers=1, concurrency=2, flush_every=1,
                       temperature=0.7, epochs=epochs)
spec = ProviderSpec(kind="sim", base_url=base_url, model="sim-model")
print(json.dumps(generate(with_epochs(load_scenarios("shp_paper", limit=n), epochs), cfg, store, spec).to_dict()))
"""


def _settled(sim: SimServer, limit_s: float = 60.0) -> None:
    """Wait until the server has answered every request it took (none still sleeping out its latency): the
    event itself, not a pause that a loaded machine can outlast."""
    deadline = time.monotonic() + limit_s
    while True:
        s = sim.stats
        answered = s["ok"] + s["http_429"] + s["http_4xx"] + s["faults_total"] + s["slow_faults"]
        if answered >= s["requests"]:
            return
        assert time.monotonic() < deadline, f"{s['requests'] - answered} request(s) still unanswered after {limit_s} s"
        time.sleep(0.02)


def _cmd(store: Path, base_url: str, n: int, epochs: int) -> list[str]:
    return [sys.executable, "-c", _GENERATE, str(store), base_url, str(n), str(epochs)]


def _replied(rounds: list[dict], tasks: int, epochs: int) -> None:
    """Every stored draft is exactly the simulated model's reply to its round's request -- the Writer sampled at 0.7
    with the seed of its task, epoch and round -- as an uninterrupted run writes it; the epochs differ."""
    from shp_ray.generation.loop import writer_request
    from shp_ray.providers.sim.replies import ReplyOptions, reply_text
    from shp_ray.providers.tokens import truncate_tokens

    cfg = GenerationConfig(max_rounds=3, temperature=0.7, epochs=epochs)
    stored = {(r["scenario_id"], r["round"]): r for r in rounds}
    for scn in with_epochs(load_scenarios("shp_paper", limit=tasks), epochs):
        prev, feedback = "", ""
        for t in (1, 2, 3):
            req = writer_request(scn, cfg, "sim-model", t, prev, feedback)
            want, _ = truncate_tokens(reply_text(ReplyOptions(), list(req.messages), req.seed), cfg.max_tokens)
            got = stored[(scn.scenario_id, t)]
            assert got["draft"] == want, (scn.scenario_id, t)
            prev, feedback = got["draft"], got["feedback"]
    firsts = [(stored[(s.task, 1)]["draft"], stored[(s.scenario_id, 1)]["draft"])
              for s in with_epochs(load_scenarios("shp_paper", limit=tasks), epochs) if s.epoch > 1]  # fmt: skip
    assert firsts and all(a != b for a, b in firsts)


def test_kill_minus_9_then_resume_repeats_no_paid_call(tmp_path, ray_session) -> None:
    """A sampled (temperature 0.7), 2-epoch run killed mid-way and resumed pays exactly the calls it had not
    completed, and its drafts are byte for byte what their seeds give (the same as an uninterrupted run's)."""
    tasks, epochs = 5, 2
    n, store_dir = tasks * epochs, tmp_path / "store"
    cache = store_dir / "_cache" / "responses.sqlite"
    env = {**os.environ, "CI": "true", "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    with SimServer(latency_s=0.15) as sim:
        proc = subprocess.Popen(
            _cmd(store_dir, sim.base_url, tasks, epochs), cwd=ROOT, env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while _count(cache) < 12 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"finished before the kill: {proc.stderr.read().decode()[-2000:]}"
        # kill -9 the driver and every process it started (Ray workers sit in their own process
        # groups, so by pid): nothing of the run may go on writing after this point.
        family = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(30)
        proc.stderr.close()
        psutil.wait_procs([p for p in map(_proc, family) if p is not None], timeout=30)
        _settled(sim)  # the replies that were in flight when the run died are served (paid) before counting
        cached_at_kill, paid_before = _count(cache), sim.stats["ok"]
        assert 12 <= cached_at_kill < n * 5
        stored = Store(store_dir).read("rounds")
        assert stored.num_rows % 3 == 0 and stored.num_rows < n * 3  # whole trajectories only

        out = subprocess.run(
            _cmd(store_dir, sim.base_url, tasks, epochs), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr[-3000:]
        summary = json.loads(out.stdout.strip().splitlines()[-1])
        paid_after = sim.stats["ok"] - paid_before
    # Exactly the calls that had not completed were paid for; none that had completed was repeated.
    assert paid_after == n * 5 - cached_at_kill
    assert summary["skipped"] == stored.num_rows // 3 and summary["generated"] == n - summary["skipped"]
    store = Store(store_dir)
    rounds = store.read("rounds")
    assert rounds.num_rows == n * 3 and _unique(rounds, "gen_id", "scenario_id", "round")
    assert store.read("scenarios").num_rows == n and _unique(store.read("scenarios"), "scenario_id")
    judgments = store.read("judgments")
    assert judgments.num_rows == n * 3 and _unique(judgments, "judge_key")
    assert store.read("generations").num_rows == 1 and store.read("failures").num_rows == 0
    folder = Path(store.table_path("rounds"))
    leftovers = [p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".parquet")]
    assert leftovers == []  # the killed writer's temp file (if any) was swept
    assert [p.name for p in folder.iterdir()] == [f"gen_id={summary['gen_id']}"]  # one generation, one folder
    # The store as the kill and the resume left it (never bucketed) replays on Ray as on one node.
    same_summary(str(store_dir), ray_session.get_runtime_context().gcs_address)
    # The kill may have fallen between a flush's rounds and their signals: what is missing is rebuilt, and
    # every stored signal equals what its rounds give.
    signals_store.build(store)
    checked = signals_store.check(store)
    assert (checked.checked_rows, checked.different_rows, checked.unstored) == (n * 3, 0, 0)
    _replied(rounds.to_pylist(), tasks, epochs)
    epochs_of = {r["scenario_id"]: r["epoch"] for r in store.read("scenarios").to_pylist()}
    assert sorted(epochs_of.values()) == [1] * tasks + [2] * tasks


def test_a_run_starts_only_the_actors_it_needs(tmp_path, ray_session) -> None:
    """What a small run costs is the actor processes it starts. A run whose one worker is the only caller of a
    server started for it starts no limiter actor (on a long-lived Ray each run against a fresh sim/llama port
    used to leave one detached actor behind); with two workers the server's limiter is an actor, removed when the
    run ends; an endpoint that outlives the run keeps its limiter. One worker holds the embedding model itself (no
    embedding actor, and its embedded texts still counted); two share an embedding actor. No store writer actor:
    the driver writes."""
    from ray._private.state import actors  # the GCS's table of actors, the dead ones included

    from shp_ray.providers.shared_limiter import LIMITER_PREFIX, forget_limiter

    def limiters(*, alive: bool) -> set[str]:
        if alive:
            names = {a["name"] for a in ray_session.util.list_named_actors(all_namespaces=True)}
        else:
            names = {a.get("Name", "") for a in actors().values()}
        return {n for n in names if n.startswith(LIMITER_PREFIX)}

    def classes() -> dict[str, str]:  # actor id -> its class
        return {key: str(a.get("ActorClassName", "")).rsplit(".", 1)[-1] for key, a in actors().items()}

    ever, before = limiters(alive=False), limiters(alive=True)
    for workers, ephemeral, started, kept in ((1, True, 0, 0), (2, True, 1, 0), (1, False, 1, 1)):
        seen = set(classes())
        cfg = GenerationConfig(max_rounds=1, embedder="fake-hash", judge="none", workers=workers, concurrency=1)
        with SimServer() as sim:
            spec = ProviderSpec(kind="sim", base_url=sim.base_url, model="sim-model")
            opts = RunOptions(progress=False, ephemeral_endpoint=ephemeral)
            s = generate(
                load_scenarios("shp_paper", limit=2), cfg, Store(tmp_path / f"s{workers}{ephemeral}"), spec, opts
            )
            assert s.generated == 2 and s.paid_calls == 2 and s.embedded_texts == 2
        new = [c for key, c in classes().items() if key not in seen]
        expected = ["TrajectoryWorker"] * workers + (["EmbedActor"] if workers > 1 else [])
        assert sorted(c for c in new if not c.startswith("Limiter")) == sorted(expected), new
        now = limiters(alive=False)
        assert (len(now - ever), len(limiters(alive=True) - before)) == (started, kept), (workers, ephemeral)
        ever = now
    assert forget_limiter(spec) and limiters(alive=True) == before
