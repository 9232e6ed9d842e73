"""Token log-probabilities, summarised once per draft (``draft_logprobs``), and the token-confidence family.

The summaries (shp_ray.policy.logprobs), the rule's parameters, the request and its response-cache key (a request
that does not ask keeps the key of every shipped cache), the simulator's and the client's reading of
``choices[0].logprobs.content``, a generation on real Ray against the simulator that stores them and replays
``confidence`` (DuckDB = reference = live), and one against the real embedded llama-server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import sqlite3
from pathlib import Path

import pytest

import analysis
from shp_ray import Stopper
from shp_ray.generation.config import GenerationConfig, LogprobSpec
from shp_ray.generation.records import load_trajectories
from shp_ray.generation.services import CachedChat, completion_from_record, completion_record
from shp_ray.policy.logprobs import STATS, summarise
from shp_ray.policy.reference import replay
from shp_ray.policy.table import policy_by_name
from shp_ray.providers.base import ChatRequest, Completion, Usage
from shp_ray.providers.reply import reply_logprobs
from shp_ray.providers.sim.chat import chat_completion, parse_chat
from shp_ray.providers.sim.replies import ReplyOptions
from storage.cache import ResponseCache
from storage.parts import Store

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_CACHES = sorted(ROOT.glob("results/*/store/_cache/responses.sqlite"))


def test_the_four_summaries_of_a_drafts_token_log_probabilities() -> None:
    lps = [-0.9, -0.2, -1.6, -0.4, -0.7, -1.1]
    got = summarise(lps, last_k=2)
    assert got is not None and list(got) == list(STATS)
    assert got["mean"] == pytest.approx(-4.9 / 6) and got["min"] == -1.6
    assert got["tail10"] == -1.6  # the lowest 10% of 6 tokens: one token
    assert got["last_k"] == pytest.approx(-0.9)
    twenty = [-0.1] * 17 + [-2.0, -3.0, -4.0]
    assert summarise(twenty, last_k=100)["tail10"] == pytest.approx(-3.5)  # ceil(2.0) = the two lowest
    assert summarise(twenty, last_k=100)["last_k"] == summarise(twenty)["mean"]  # fewer than k: all of them
    # nothing readable as log-probabilities: no summary, never zeros
    for bad in ([], None, [0.5], [-0.1, math.nan], [-math.inf]):
        assert summarise(bad) is None


@pytest.mark.parametrize(
    "bad", ["confidence@stat=median", "confidence@threshold=0.5", "confidence@threshold=nan", "confidence@k=3"]
)
def test_bad_confidence_parameters_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="confidence"):
        policy_by_name(bad)


def test_the_rule_stops_at_the_first_draft_whose_stat_reaches_the_threshold() -> None:
    def stop(policy: str, rounds: list[list[float] | None]) -> tuple[int, str | None]:
        s = Stopper(policy, max_rounds=6, encode=lambda texts: [[1.0, 0.0]] * len(texts))
        for lps in rounds:
            d = s.observe("Answer: Paris", logprobs=lps)
            if d.halt:
                break
        return d.round, d.reason

    sure, unsure = [-0.05, -0.02], [-0.05, -3.0]
    assert stop("confidence", [unsure, None, sure]) == (3, "confident")  # a draft without them never stops it
    assert stop("confidence@stat=min,threshold=-0.05", [unsure, [-0.05, -0.05]]) == (2, "confident")  # the >=
    assert stop("confidence", [None] * 6) == (6, "failsafe")
    assert stop("confidence@stat=last_k,threshold=-0.1", [{"mean": -2, "min": -3, "tail10": -3, "last_k": -0.1}]) == (
        1,
        "confident",
    )  # a summary of the caller's own last_k is taken as it is


def test_asking_is_no_part_of_gen_id_and_reaches_the_writers_request() -> None:
    from shp_ray.generation.datasets import load_scenarios
    from shp_ray.generation.loop import critic_request, writer_request

    asked = GenerationConfig(logprobs=LogprobSpec(request=True, last_k=4))
    assert asked.gen_id("sim", "m") == GenerationConfig().gen_id("sim", "m")
    scn = load_scenarios("shp_paper", limit=1)[0]
    assert (
        writer_request(scn, asked, "m", 1, "", "").logprobs
        and not writer_request(scn, GenerationConfig(), "m", 1, "", "").logprobs
    )
    assert not critic_request(scn, asked, "m", 1, "a draft").logprobs  # only drafts are read for confidence
    with pytest.raises(ValueError, match="logprobs.last_k: must be an integer >= 1"):
        LogprobSpec(last_k=0)


def test_a_request_asks_for_logprobs_only_when_told_and_keys_them_only_then() -> None:
    plain = ChatRequest("m", (("user", "q"),), max_tokens=8, seed=3)
    asked = ChatRequest("m", (("user", "q"),), max_tokens=8, seed=3, logprobs=True)
    assert "logprobs" not in plain.openai_body() and "logprobs" not in plain.key_parts()
    assert asked.openai_body()["logprobs"] is True and asked.key_parts()["logprobs"] is True
    assert plain.cache_key() != asked.cache_key()


@pytest.mark.skipif(not SHIPPED_CACHES, reason="no shipped response cache")
def test_the_shipped_caches_are_still_hit_by_requests_that_do_not_ask() -> None:
    """Every key of every shipped response cache is what the same request gives today (logprobs not asked), and
    asking for them is another key, in none of them: a run that asks pays once more, never reads a reply without."""
    for path in SHIPPED_CACHES:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            rows = db.execute(f"SELECT key, value FROM {ResponseCache.table}").fetchall()
        assert rows, path
        keys = {k for k, _ in rows}
        for key, value in rows:
            parts = json.loads(value)["key_parts"]
            msgs = tuple((role, content) for role, content in parts["messages"])
            kw = {k: parts[k] for k in ("max_tokens", "temperature", "seed")}
            assert ChatRequest(parts["model"], msgs, **kw).cache_key() == key, path
            assert ChatRequest(parts["model"], msgs, **kw, logprobs=True).cache_key() not in keys


class _Counting:
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        lps = (-0.25, -0.5) if request.logprobs else None
        return Completion("Answer: Paris", Usage(3, 2), logprobs=lps)


def test_a_cached_reply_keeps_its_logprobs_and_an_old_record_reads_without(tmp_path) -> None:
    provider = _Counting()
    chat = CachedChat(provider, ResponseCache(tmp_path / "r.sqlite"))
    asked = ChatRequest("m", (("user", "q"),), logprobs=True)
    plain = ChatRequest("m", (("user", "q"),))

    async def run() -> list[Completion]:
        return [await chat(asked), await chat(asked), await chat(plain), await chat(plain)]

    first, hit, fresh, plain_hit = asyncio.run(run())
    assert provider.calls == 2 and hit.cached and plain_hit.cached and not fresh.cached
    assert first.logprobs == hit.logprobs == (-0.25, -0.5)
    assert fresh.logprobs is None and plain_hit.logprobs is None
    # a record written before log-probabilities existed has no such key, and reads as a reply without them
    old = completion_record(plain, Completion("x", Usage(1, 1)))
    assert "logprobs" not in old and completion_from_record(old).logprobs is None


def test_the_simulator_returns_plausible_logprobs_when_asked_and_the_client_reads_them() -> None:
    body = {"model": "sim", "messages": [{"role": "system", "content": "You are the Writer."},
                                         {"role": "user", "content": "Question: Who?\nRound: 1"}]}  # fmt: skip
    opts = ReplyOptions()
    plain = chat_completion(opts, parse_chat(body), reply_id="a", created=0)
    assert "logprobs" not in plain["choices"][0] and reply_logprobs(plain) is None
    asked = chat_completion(opts, parse_chat({**body, "logprobs": True}), reply_id="a", created=0)
    lps = reply_logprobs(asked)
    assert lps is not None and len(lps) == asked["usage"]["completion_tokens"] and all(v <= 0 for v in lps)
    assert asked["choices"][0]["message"] == plain["choices"][0]["message"]  # the same reply, with its logprobs
    later = {**body, "logprobs": True, "messages": [body["messages"][0], {"role": "user", "content": "Round: 4"}]}
    assert (
        summarise(reply_logprobs(chat_completion(opts, parse_chat(later), reply_id="b", created=0)))["mean"]
        > (summarise(lps)["mean"])
    )  # a settling draft reads surer


def _generate_and_replay(tmp_path: Path, spec, cfg: GenerationConfig, limit: int) -> tuple[list, dict, dict, dict]:
    """Generate ``limit`` trajectories into a new store; its draft_logprobs and rounds rows, and the replay's and the
    reference's (stop round, reason) of ``confidence`` per scenario."""
    from shp_ray.generation.datasets import load_scenarios
    from shp_ray.generation.generate import RunOptions, generate

    store = Store(tmp_path / "store")
    s = generate(load_scenarios("shp_paper", limit=limit), cfg, store, spec, RunOptions(progress=False))
    assert s.failed == 0
    logprobs = store.read("draft_logprobs").to_pylist()
    rounds = {(r["scenario_id"], r["round"]): r for r in store.read("rounds").to_pylist()}
    policy = policy_by_name("confidence@stat=mean,threshold=-0.3")
    con = analysis.connect(str(store.root), policies=[policy])
    try:
        rows = con.sql("SELECT scenario_id, stop_round, reason FROM replay").fetchall()
    finally:
        con.close()
    got = {sid: (t, why) for sid, t, why in rows}
    refs = load_trajectories(store, s.gen_id)
    ref = {sid: (o.stop_round, o.reason) for sid, o in ((sid, replay(policy, tr)) for sid, tr in refs.items())}
    return logprobs, rounds, got, ref


@pytest.mark.integration
def test_a_sim_generation_stores_logprobs_and_replays_confidence(tmp_path, ray_session) -> None:
    from shp_ray.providers.base import ProviderSpec
    from shp_ray.providers.sim.server import SimServer

    cfg = GenerationConfig(max_rounds=3, judge="none", embedder="fake-hash", logprobs=LogprobSpec(request=True))
    with SimServer() as sim:
        spec = ProviderSpec(kind="sim", base_url=sim.base_url, model="sim-model")
        logprobs, rounds, got, ref = _generate_and_replay(tmp_path, spec, cfg, limit=3)
    assert len(logprobs) == len(rounds) == 9
    for r in logprobs:
        assert r["tokens"] == rounds[(r["scenario_id"], r["round"])]["writer_completion_tokens"] and r["k"] == 16
        assert r["min"] <= r["tail10"] <= r["mean"] <= 0
    assert got == ref and len(got) == 3
    assert any(why == "confident" for _, why in got.values())  # the simulator's drafts grow surer


@pytest.mark.integration
def test_live_and_batch_calls_store_the_same_logprobs_in_process(tmp_path) -> None:
    """The local backend, live and through the simulator's Batch API (the batch line carries ``logprobs: true``,
    its result line is read as a live reply is): the same draft_logprobs rows."""
    from shp_ray.generation.datasets import load_scenarios
    from shp_ray.generation.generate import RunOptions, generate
    from shp_ray.providers.base import ProviderSpec
    from shp_ray.providers.sim.server import SimServer

    cfg = GenerationConfig(max_rounds=2, judge="none", embedder="fake-hash", logprobs=LogprobSpec(request=True))
    rows = {}
    with SimServer(batch_delay_s=0.0) as sim:
        for mode in ("live", "batch"):
            spec = ProviderSpec(kind="sim", base_url=sim.base_url, model="sim-model", batch=mode == "batch",
                                batch_poll_s=0.05)  # fmt: skip
            store = Store(tmp_path / mode)
            generate(
                load_scenarios("shp_paper", limit=2), cfg, store, spec, RunOptions(backend="local", progress=False)
            )
            rows[mode] = sorted(store.read("draft_logprobs").to_pylist(), key=lambda r: (r["scenario_id"], r["round"]))
        batched = sim.stats["batch"]["lines_ok"]
    assert batched > 0 and len(rows["live"]) == 4 and rows["live"] == rows["batch"]


@pytest.mark.integration
def test_the_embedded_llama_server_returns_logprobs_that_a_new_store_keeps(tmp_path, ray_session, embedded_llm) -> None:
    """The real llama-server answers ``logprobs: true`` with choices[0].logprobs.content[].logprob: a tiny run stores
    one summary per draft, and ``confidence`` replays on them (DuckDB = reference)."""
    server = embedded_llm()
    cfg = GenerationConfig(
        max_rounds=2, max_tokens=24, judge="none", embedder="fake-hash", workers=1, concurrency=1,
        logprobs=LogprobSpec(request=True, last_k=4),
    )  # fmt: skip
    logprobs, rounds, got, ref = _generate_and_replay(tmp_path, server.spec(), cfg, limit=1)
    assert len(logprobs) == len(rounds) == 2
    for r in logprobs:
        assert r["tokens"] == rounds[(r["scenario_id"], r["round"])]["writer_completion_tokens"] and r["k"] == 4
        assert r["min"] <= r["tail10"] <= r["mean"] <= 0 and r["min"] < 0
    assert got == ref and len(got) == 1


def test_a_store_without_logprobs_for_every_trajectory_leaves_confidence_out_in_one_line(tmp_path, caplog) -> None:
    from tests.test_families_property import make_encoder, write_store

    trajs = [
        ("s0", ["Paris", "Paris"], ["Be shorter.", ""], [(5, 3), (5, 0)], [0.2, 0.4], [], ["paris"] * 2),
        ("s1", ["Rome"], [""], [(5, 0)], [0.2], [], ["rome"], [[-0.01]]),
    ]  # s1's draft has log-probabilities, s0's none (a rerun that asked skipped it): still left out
    write_store(str(tmp_path), trajs, make_encoder(0.01))
    pols = [policy_by_name("confidence"), policy_by_name("answer_stable")]
    with caplog.at_level("WARNING", logger="analysis.replay.family_replay"):
        con = analysis.connect(str(tmp_path), policies=pols)
    try:
        replayed = {r[0] for r in con.sql("SELECT DISTINCT policy FROM replay").fetchall()}
    finally:
        con.close()
    assert replayed == {"answer_stable"}
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("confidence left out of the replay: generation g holds") and "logprobs.request=true" in line
    # the reference replay, asked anyway: s0's drafts never stop it; a store with none at all is refused
    assert replay(pols[0], load_trajectories(Store(str(tmp_path)), "g", judge="j")["s0"]).reason == "failsafe"
    write_store(str(tmp_path / "none"), trajs[:1], make_encoder(0.01))
    with pytest.raises(ValueError, match="token log-probabilities"):
        replay(pols[0], load_trajectories(Store(str(tmp_path / "none")), "g", judge="j")["s0"])


def test_a_round_stored_twice_is_read_once(tmp_path) -> None:
    """A kill between a trajectory's draft_logprobs and its rounds regenerates it from the cache: equal rows twice."""
    import pyarrow as pa

    from storage.logprobs_schema import DRAFT_LOGPROBS
    from tests.test_families_property import make_encoder, write_store

    trajs = [("s0", ["Lyon", "Paris"], ["Fix.", ""], [(5, 3), (5, 0)], [0.2, 0.4], [], ["lyon", "paris"],
              [[-0.9, -0.4], [-0.05]])]  # fmt: skip
    write_store(str(tmp_path), trajs, make_encoder(0.01))
    store, policy = Store(str(tmp_path)), policy_by_name("confidence")

    def stops() -> list[tuple]:
        con = analysis.connect(str(tmp_path), policies=[policy])
        try:
            return con.sql("SELECT scenario_id, stop_round, reason FROM replay").fetchall()
        finally:
            con.close()

    once = stops()
    store.write("draft_logprobs", pa.Table.from_pylist(store.read("draft_logprobs").to_pylist(), schema=DRAFT_LOGPROBS))
    assert store.read("draft_logprobs").num_rows == 4 and stops() == once == [("s0", 2, "confident")]
    assert replay(policy, load_trajectories(store, "g", judge="j")["s0"]).stop_round == 2


def test_an_imported_log_with_logprobs_stores_them_and_replays_confidence(tmp_path) -> None:
    """--format openai-chat: a writer reply's choices[0].logprobs; the traces format: a round's "logprobs" list."""
    from shp_ray.importer.cli import main

    def reply(text: str, lps: list[float] | None) -> dict:
        choice: dict = {"message": {"role": "assistant", "content": text}}
        if lps is not None:
            choice["logprobs"] = {"content": [{"token": "x", "logprob": v} for v in lps]}
        return {"choices": [choice], "usage": {"prompt_tokens": 5, "completion_tokens": len(lps or [1])}}

    calls = [
        ("writer", "Answer: Lyon", [-0.9, -1.2]),
        ("critic", "Check it.", None),
        ("writer", "Answer: Paris", [-0.02]),
    ]
    asked = {"messages": [{"role": "user", "content": "q"}]}
    loop = {"id": "q1", "question": "Capital of France?", "answers": ["Paris"],
            "calls": [{"agent": a, "request": asked, "response": reply(t, lp)} for a, t, lp in calls]}  # fmt: skip
    traced = {"id": "q2", "question": "Capital of Italy?", "answers": ["Rome"],
              "rounds": [{"draft": "Answer: Rome", "logprobs": [-0.01, -0.03]}]}  # fmt: skip
    chat, plain = tmp_path / "chat.jsonl", tmp_path / "traces.jsonl"
    chat.write_text(json.dumps(loop) + "\n")
    plain.write_text(json.dumps(traced) + "\n")
    store = tmp_path / "store"
    assert main([str(chat), "--store", str(store), "--format", "openai-chat", "--embedder", "fake-hash"]) == 0
    assert main([str(plain), "--store", str(store), "--embedder", "fake-hash"]) == 0
    rows = {(r["scenario_id"], r["round"]): r for r in Store(str(store)).read("draft_logprobs").to_pylist()}
    assert sorted(rows) == [("q1", 1), ("q1", 2), ("q2", 1)] and rows[("q1", 1)]["mean"] == pytest.approx(-1.05)
    con = analysis.connect(str(store), policies=[policy_by_name("confidence")])
    try:
        got = sorted(con.sql("SELECT scenario_id, stop_round, reason FROM replay").fetchall())
    finally:
        con.close()
    assert got == [("q1", 2, "confident"), ("q2", 1, "confident")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**traced, "id": "q3", "rounds": [{"draft": "x", "logprobs": [0.5]}]}) + "\n")
    assert main([str(bad), "--store", str(store), "--embedder", "fake-hash"]) == 2


def test_a_provider_that_returns_none_stores_none_and_confidence_is_left_out(tmp_path, caplog) -> None:
    """Asked of a provider that returns no log-probabilities (the scripted double): no row, never zeros."""
    from shp_ray.generation.datasets import load_scenarios
    from shp_ray.generation.generate import RunOptions, generate
    from shp_ray.providers.base import ProviderSpec

    cfg = GenerationConfig(max_rounds=2, judge="none", embedder="fake-hash", logprobs=LogprobSpec(request=True))
    store = Store(tmp_path / "store")
    spec = ProviderSpec(kind="scripted", model="scripted")
    s = generate(load_scenarios("shp_paper", limit=2), cfg, store, spec, RunOptions(backend="local", progress=False))
    assert s.generated == 2 and store.read("rounds").num_rows == 4 and store.read("draft_logprobs").num_rows == 0
    with caplog.at_level("WARNING", logger="analysis.replay.family_replay"):
        con = analysis.connect(str(store.root), policies=[policy_by_name("confidence"), policy_by_name("verifier")])
    try:
        assert {r[0] for r in con.sql("SELECT DISTINCT policy FROM replay").fetchall()} == {"verifier"}
    finally:
        con.close()
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["confidence left out of the replay"]
