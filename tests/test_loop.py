"""The Writer -> Critic loop in-process: round semantics, live == replay, bad input."""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace

import numpy as np
import pytest

from shp_ray.generation.datasets import Scenario, load_scenarios
from shp_ray.generation.embedder import Embedder
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.generation.loop import generate_trajectory, live_trajectory
from shp_ray.generation.prompts import NO_CONTEXTS, critic_messages, writer_messages
from shp_ray.generation.records import load_trajectories
from shp_ray.generation.services import CachedChat, EmbedBatcher, JudgeService, LocalServices
from shp_ray.policy.reference import replay
from shp_ray.policy.table import standard_policies
from shp_ray.providers.base import ChatRequest, Completion, ProviderSpec
from storage.cache import JUDGMENTS_FILE, RESPONSES_FILE, JudgeCache, ResponseCache
from storage.parts import Store
from tests.gen_support import ScriptedProvider

FACTORY = "tests.gen_support:make_provider"
SPEC = ProviderSpec(kind="scripted", model="scripted-model")


class Recording(ScriptedProvider):
    def __init__(self) -> None:
        super().__init__(SPEC)
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        return await super().complete(request)


@pytest.fixture(scope="module")
def embedder(embedder_factory) -> Embedder:
    return embedder_factory(model="default")  # the suite's loaded model, this module's cache


def _services(provider, embedder, cache_dir=None, judge="lexical"):
    rcache = ResponseCache(cache_dir / RESPONSES_FILE) if cache_dir else None
    jcache = JudgeCache(cache_dir / JUDGMENTS_FILE) if cache_dir else None
    chat = CachedChat(provider, rcache)
    return LocalServices(chat, EmbedBatcher(embedder), JudgeService(judge, jcache, chat, SPEC.model)), chat


def test_generate_mode_round_semantics(embedder: Embedder) -> None:
    scn = load_scenarios("shp_paper", limit=1)[0]
    provider = Recording()
    services, _ = _services(provider, embedder)
    cfg = GenerationConfig(max_rounds=4)
    out = asyncio.run(generate_trajectory(scn, cfg, SPEC.model, services))
    assert not out.failed and [r.round for r in out.rounds] == [1, 2, 3, 4]
    roles = [("Writer" if "You are the Writer" in r.messages[0][1] else "Critic") for r in provider.requests]
    assert roles.count("Writer") == 4 and roles.count("Critic") == 3  # no critic at the last round
    assert out.rounds[-1].feedback == "" and all(r.feedback for r in out.rounds[:-1])
    writers = [r for r in provider.requests if "You are the Writer" in r.messages[0][1]]
    assert "Previous draft" not in writers[0].messages[1][1] and "Round: 1" in writers[0].messages[1][1]
    for t in range(2, 5):  # Writer(q, C, x_{t-1}, f_{t-1})
        user = writers[t - 1].messages[1][1]
        assert f"Round: {t}" in user
        assert out.rounds[t - 2].draft in user and out.rounds[t - 2].feedback in user
    for r in out.rounds:
        assert r.embedding.shape == (384,) and abs(float(np.linalg.norm(r.embedding)) - 1.0) < 1e-5
        assert r.judgment is not None and "not an LLM" in r.judgment.judge


def test_live_stop_rounds_equal_replay_for_every_policy(tmp_path, embedder: Embedder) -> None:
    scenarios = load_scenarios("shp_paper", limit=12)
    cfg = GenerationConfig(max_rounds=6, embedder="default", workers=1, concurrency=4)
    summary = generate(
        scenarios, cfg, Store(tmp_path / "store"), SPEC, RunOptions(provider_factory=FACTORY, backend="local")
    )
    assert summary.generated == 12 and summary.failed == 0
    trajs = load_trajectories(Store(tmp_path / "store"), summary.gen_id, judge=summary.judge)
    assert len(trajs) == 12

    provider = Recording()
    services, chat = _services(provider, embedder, tmp_path / "store" / "_cache")
    policies = [p for p in standard_policies() if p.kind in ("cascade", "random")]
    assert len([p for p in policies if p.kind == "cascade"]) >= 13
    reasons = set()

    async def run_all() -> None:
        for policy in policies:
            for scn in scenarios:
                live = await live_trajectory(scn, policy, cfg, SPEC.model, services)
                ref = replay(policy, trajs[scn.scenario_id])
                assert (live.stop_round, live.reason) == (ref.stop_round, ref.reason), (policy.name, scn.scenario_id)
                assert live.operational_tokens == ref.operational_tokens, (policy.name, scn.scenario_id)
                reasons.add(live.reason)

    asyncio.run(run_all())
    assert provider.requests == []  # every live call was a hit in the generation's response cache
    assert chat.stats.cached == chat.stats.calls > 0
    assert {"critic", "entropy", "failsafe"} <= reasons  # the comparison exercised the cascade's branches


def test_bad_input_never_crashes_the_run(tmp_path) -> None:
    base = load_scenarios("shp_paper", limit=6)
    marked = [
        replace(base[0], scenario_id="fail", question=base[0].question + " [fail-writer]"),
        replace(base[1], scenario_id="empty", question=base[1].question + " [empty-draft]"),
        replace(base[2], scenario_id="punct", question=base[2].question + " [punct-draft]"),
        Scenario("noctx", "custom", "test", "Who wrote Hamlet?", (), "William Shakespeare"),
        *base[3:],
    ]
    cfg = GenerationConfig(max_rounds=3, embedder="fake-hash")
    store = Store(tmp_path / "s")
    s = generate(marked, cfg, store, SPEC, RunOptions(provider_factory=FACTORY, backend="local"))
    assert (s.generated, s.failed) == (6, 1)
    failures = store.read("failures").to_pylist()
    assert [(f["scenario_id"], f["stage"], f["round"]) for f in failures] == [("fail", "writer", 1)]
    assert "400" in failures[0]["message"]
    rounds = store.read("rounds").to_pylist()
    assert "fail" not in {r["scenario_id"] for r in rounds} and len(rounds) == 18
    by = {(r["scenario_id"], r["round"]): r for r in rounds}
    assert by[("empty", 2)]["draft"] == "" and not any(by[("empty", 2)]["embedding"])
    assert not any(by[("punct", 1)]["embedding"])  # zero-norm embedding stored as zeros
    trajs = load_trajectories(store, s.gen_id, judge=s.judge)
    assert trajs["punct"].rounds[1].distance == 1.0 and trajs["empty"].rounds[2].distance == 1.0
    judged = {(j["scenario_id"], j["draft_hash"]): j for j in store.read("judgments").to_pylist()}
    empty = judged[("empty", by[("empty", 1)]["draft_hash"])]
    assert empty["faithfulness"] == 0.0 and empty["answer_relevancy"] == 0.0
    noctx = judged[("noctx", by[("noctx", 1)]["draft_hash"])]
    assert math.isnan(noctx["faithfulness"]) and math.isnan(noctx["context_recall"]) and "no contexts" in noctx["error"]
    assert 0.0 <= noctx["answer_relevancy"] <= 1.0
    # A rerun retries the failed scenario (it has no rounds), skips the rest, duplicates nothing.
    again = generate(marked, cfg, store, SPEC, RunOptions(provider_factory=FACTORY, backend="local"))
    assert (again.skipped, again.failed, again.generated) == (6, 1, 0)
    assert store.read("rounds").num_rows == 18 and store.read("scenarios").num_rows == 7


def test_no_contexts_prompt_says_so() -> None:
    from shp_ray.generation.prompts import critic_messages, writer_messages

    assert NO_CONTEXTS in writer_messages("q?", (), 1, "", "")[1][1]
    assert NO_CONTEXTS in critic_messages("q?", (), 1, "d")[1][1]


def test_unparsable_llm_judge_is_nan_not_zero(tmp_path) -> None:
    base = load_scenarios("shp_paper", limit=2)
    scns = [replace(base[0], scenario_id="bad", question=base[0].question + " [bad-judge]"), base[1]]
    cfg = GenerationConfig(max_rounds=2, embedder="fake-hash", judge="llm", judge_parse_retries=2)
    store = Store(tmp_path / "s")
    s = generate(scns, cfg, store, SPEC, RunOptions(provider_factory=FACTORY, backend="local"))
    assert s.generated == 2 and s.judge == "llm:scripted-model"
    rows = store.read("judgments").to_pylist()
    bad = [r for r in rows if r["scenario_id"] == "bad"]
    good = [r for r in rows if r["scenario_id"] != "bad"]
    assert len(bad) == 2 and len(good) == 2
    for r in bad:
        assert all(math.isnan(r[m]) for m in ("faithfulness", "answer_relevancy", "context_precision"))
        assert "attempt 3" in r["error"] and r["judge_prompt_tokens"] > 0  # all three attempts were paid
    for r in good:
        assert r["error"] == "" and 0.0 <= r["faithfulness"] <= 1.0


def test_live_rejects_oracle(embedder: Embedder) -> None:
    from shp_ray.policy.table import policy_by_name

    services, _ = _services(Recording(), embedder)
    scn = load_scenarios("shp_paper", limit=1)[0]
    with pytest.raises(ValueError, match="oracle_is"):
        asyncio.run(live_trajectory(scn, policy_by_name("oracle_is"), GenerationConfig(), SPEC.model, services))


def test_a_shallower_generation_pays_nothing_and_shares_judgments(tmp_path) -> None:
    scns = load_scenarios("shp_paper", limit=3)
    store = Store(tmp_path / "s")
    deep = GenerationConfig(max_rounds=3, embedder="fake-hash", judge="llm")
    first = generate(scns, deep, store, SPEC, RunOptions(provider_factory=FACTORY, backend="local"))
    assert first.paid_tokens > 0 and store.read("judgments").num_rows == 9
    shallow = replace(deep, max_rounds=2)
    again = generate(scns, shallow, store, SPEC, RunOptions(provider_factory=FACTORY, backend="local"))
    assert again.gen_id != first.gen_id and again.generated == 3
    # rounds 1-2 of every scenario: response cache hits; their drafts' judgments: judge cache hits.
    assert again.paid_tokens == 0 and again.calls == again.cached_calls == 3 * 3
    assert store.read("judgments").num_rows == 9  # no judge key written twice
    assert store.read("rounds").num_rows == 9 + 6 and store.read("generations").num_rows == 2
    # retry_failed=False: a known failure is not tried again
    bad = [replace(scns[0], scenario_id="f", question=scns[0].question + " [fail-writer]")]
    generate(bad, shallow, store, SPEC, RunOptions(provider_factory=FACTORY, backend="local"))
    skip = generate(
        bad,
        replace(shallow, retry_failed=False),
        store,
        SPEC,
        RunOptions(provider_factory=FACTORY, backend="local"),
    )
    assert (skip.skipped, skip.failed) == (1, 0)


def test_shared_prefix_prompts_open_with_the_question_and_contexts():
    """shp-wc-v3: every request of one question and role starts with the same question + contexts block
    (what llama.cpp's prompt cache reuses); the round line follows it, so the simulated server still reads it."""
    q, ctx = "Who wrote it?", ["Alpha wrote it.", "Beta read it."]
    block = "Question: Who wrote it?\nContexts:\n[1] Alpha wrote it.\n[2] Beta read it.\n"
    w1 = writer_messages(q, ctx, 1, "", "", "shp-wc-v3")[1][1]
    w3 = writer_messages(q, ctx, 3, "draft two", "PROBLEMS: x", "shp-wc-v3")[1][1]
    c2 = critic_messages(q, ctx, 2, "draft two", "shp-wc-v3")[1][1]
    for text, t in ((w1, 1), (w3, 3), (c2, 2)):
        assert text.startswith(block) and text[len(block) :].startswith(f"Round: {t}\n")
    old = writer_messages(q, ctx, 1, "", "", "shp-wc-v2")[1][1]
    assert old.startswith("Round: 1\n")  # a stored v2 generation keeps its exact text
