"""A loop where revising can matter (issue 41): HumanEval's hidden tests split into a public half the Critic may show
and a private half that scores; a sampling Writer seeded per (task, epoch, round); epochs, N trajectories per task
with statistics clustered by task; and the resampling control (critic=none). In-process first, then swept on the
simulated server."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from hydra import compose, initialize_config_module

import conf.schema  # noqa: F401
from analysis.stats import clustered
from conf.resolve import ConfigError, to_job
from shp_ray.generation import check_split as ts
from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.datasets import with_epochs
from shp_ray.generation.humaneval import hidden_test, load_humaneval
from shp_ray.generation.loop import critic_request, generate_trajectory, writer_request
from shp_ray.generation.prompts import PRESETS, critic_messages, preset, writer_messages
from shp_ray.generation.records import scenario_row
from shp_ray.providers.sim.scripted import ScriptedProvider
from storage.parts import Store
from tests.test_code_loop import sweep  # one sweep-in-process helper for the code-loop tests

REVISE = GenerationConfig(prompts=preset("code-v1"), critic="tests", max_rounds=3, temperature=0.7, tests="split")


@pytest.fixture(scope="module")
def split_tasks():
    return ts.with_public_tests(load_humaneval(0.25))


@pytest.fixture(scope="module")
def hydra_ctx():
    with initialize_config_module(config_module="conf", version_base="1.3"):
        yield


def test_the_split_is_deterministic_halves_by_hash_and_keeps_a_lone_assertion_private(split_tasks):
    sizes = []
    for s in split_tasks:
        task_id, entry = s.meta["task_id"], s.meta["entry_point"]
        found = ts.assertions(task_id, entry)
        public, private = ts.split(task_id, entry)
        assert len(public) + len(private) == len(found) and len(public) <= len(found) // 2
        assert set(public).isdisjoint(private) and all(a.example is not None for a in public)
        if len(found) == 1:
            assert public == () and private == found  # a lone assertion stays private
        ranked = sorted(found, key=lambda a: (ts._key(task_id, a.text), found.index(a)))
        assert set(public) <= set(ranked[: len(found) // 2])  # the first half of the hash order, nothing else
        sizes.append((len(public), len(private)))
    assert sum(p for p, _ in sizes) > 300 and all(q >= p for p, q in sizes)
    assert any(len(ts.assertions(s.meta["task_id"], s.meta["entry_point"])) == 1 for s in split_tasks)
    # the public half joined the visible tests; the docstring's came first and stay
    docstring = {s.meta["task_id"]: s.meta["examples"] for s in load_humaneval(0.25)}
    for s in split_tasks:
        assert s.meta["examples"][: len(docstring[s.meta["task_id"]])] == docstring[s.meta["task_id"]]
        assert s.meta["tests"] == "split"


def test_no_private_assertion_reaches_any_prompt_of_any_preset(split_tasks):
    """Every prompt of every preset for all 164 problems, with the richest report the loop can write (every visible
    test failing, listed): no private assertion, not even its call, appears; the stored scenario holds none."""
    from shp_ray.generation.code_tests import critique, visible_report

    for s in split_tasks:
        task_id, entry = s.meta["task_id"], s.meta["entry_point"]
        private = ts.split(task_id, entry)[1]
        wrong = f"```python\ndef {entry}(*args, **kwargs):\n    return 0\n```"
        report = "\n".join(f"- {call} should be {want}, got 0" for call, want in s.meta["examples"])
        rendered = []
        for name in PRESETS:
            ps = preset(name)
            rendered += writer_messages(s.question, s.contexts, 1, "", "", ps, s.meta)
            rendered += writer_messages(s.question, s.contexts, 2, wrong, report, ps, s.meta)
            rendered += critic_messages(s.question, s.contexts, 1, wrong, ps, s.meta, report)
        text = "\n".join(content for _, content in rendered) + json.dumps(scenario_row(s))
        for a in private:
            assert a.text not in text, (task_id, a.text)
            if a.example is not None and list(a.example) not in s.meta["examples"]:  # (the docstring may show it)
                call, want = a.example
                assert f"{call} should be {want}" not in text and json.dumps([call, want]) not in text, (task_id, a)
        assert "def check(candidate)" not in text
    s = split_tasks[0]
    shown = critique(visible_report(s.question, s.meta, "def has_close_elements(n, t):\n    return True"), "APPROVED")
    assert all(a.example[0] not in shown for a in ts.split("HumanEval/0", "has_close_elements")[1] if a.example)


@pytest.mark.integration
def test_every_reference_solution_passes_its_public_and_private_halves(split_tasks):
    from shp_ray.generation.code_tests import examples, hidden_program, program
    from shp_ray.sandbox import run_check, run_examples

    failed = []
    for s in split_tasks:
        entry = s.meta["entry_point"]
        code = program(s.question, entry, f"```python\n{s.ground_truth}\n```")
        visible = run_examples(code, entry, examples(s.meta))
        private = ts.scored_test(s.meta)
        assert private != hidden_test(s.meta["task_id"]) or not ts.split(s.meta["task_id"], entry)[0]
        hidden = run_check(code, entry, hidden_program(s.question, entry, s.meta["task_id"], private))
        if not hidden.all_passed or (s.meta["examples"] and not visible.all_passed):
            failed.append((s.scenario_id, visible.error_class, visible.detail, hidden.error_class, hidden.detail))
    assert failed == []


def test_a_sampled_writer_is_seeded_per_task_epoch_and_round_and_the_critic_stays_greedy(split_tasks):
    (one,) = with_epochs(split_tasks[:1], 1)
    first, second = with_epochs(split_tasks[:1], 2)
    assert (first.scenario_id, second.scenario_id, second.task, second.epoch) == (
        "humaneval_0", "humaneval_0#e2", "humaneval_0", 2,
    )  # fmt: skip
    seeds = {writer_request(s, REVISE, "m", t, "", "").seed for s in (first, second) for t in (1, 2, 3)}
    assert len(seeds) == 6
    assert writer_request(one, REVISE, "m", 2, "", "") == writer_request(first, REVISE, "m", 2, "", "")
    assert critic_request(first, REVISE, "m", 1, "x").temperature == 0.0
    greedy = GenerationConfig(prompts=preset("code-v1"), critic="tests", max_rounds=3)
    assert {writer_request(s, greedy, "m", t, "", "").seed for s in (first, second) for t in (1, 2)} == {0}
    # gen_ids: temperature 0 as before; a sampled run, the split and a one-seed run each their own
    assert "seeding" not in greedy.gen_id_parts("sim", "m") and "tests" not in greedy.gen_id_parts("sim", "m")
    old = GenerationConfig(temperature=0.7, seeding="run")
    assert "seeding" not in old.gen_id_parts("sim", "m") and old.critic_temperature == 0.7
    assert GenerationConfig(epochs=3).gen_id("sim", "m") == GenerationConfig().gen_id("sim", "m")
    assert REVISE.gen_id_parts("sim", "m")["tests"] == "split"


class Services:
    def __init__(self, provider: ScriptedProvider) -> None:
        self.provider = provider

    async def chat(self, request):
        return await self.provider.complete(request)

    async def embed(self, text: str) -> np.ndarray:
        return np.full(384, 1 / np.sqrt(384), dtype=np.float32)

    async def judge(self, scenario, draft):
        return None


def test_critic_none_draws_the_first_prompt_again_each_round_with_no_critic_call(split_tasks):
    cfg = GenerationConfig(prompts=preset("code-v1"), critic="none", max_rounds=3, temperature=0.7)
    provider = ScriptedProvider()  # the simulated model's replies, its sentences drawn by each request's seed
    out = asyncio.run(generate_trajectory(split_tasks[0], cfg, "m", Services(provider)))
    assert len(provider.calls) == 3 and all("You are the Writer" in c.messages[0][1] for c in provider.calls)
    assert len({c.messages for c in provider.calls}) == 1  # the same first prompt ...
    assert len({c.seed for c in provider.calls}) == 3  # ... drawn again
    assert len({r.draft for r in out.rounds}) == 3 and all(r.feedback == "" and r.critic is None for r in out.rounds)


def test_epochs_and_critic_none_need_a_sampling_writer_and_the_split_a_code_dataset(hydra_ctx):
    def job(*overrides):
        return to_job(compose(config_name="config", overrides=["dataset=humaneval", *overrides]))

    for overrides, key in (
        (["generation.epochs=2"], "generation.epochs"),
        (["generation.critic=none"], "generation.critic"),
        (["generation.epochs=2", "generation.temperature=0.7", "generation.seeding=run"], "generation.epochs"),
    ):
        with pytest.raises(ConfigError, match=rf"^{key}: .* needs a sampling Writer"):
            job(*overrides)
    with pytest.raises(ConfigError, match=r"^dataset.tests: a public/private split"):
        to_job(compose(config_name="config", overrides=["dataset.tests=split"]))
    with pytest.raises(ConfigError, match=r"^dataset.tests: must be one of \['docstring', 'split'\]"):
        job("dataset.tests=half")
    assert job("generation.critic=none", "generation.temperature=0.7").generation.critic == "none"
    revise = to_job(compose(config_name="config", overrides=["+sweep=humaneval_revise"]))
    g = revise.generation
    assert (g.tests, g.epochs, g.temperature, g.critic, g.max_rounds) == ("split", 2, 0.7, "tests", 4)
    local = to_job(compose(config_name="config", overrides=["+sweep=humaneval_local"]))
    assert local.generation.tests == "docstring" and "tests" not in local.generation.gen_id_parts("llama", "m")
    paper = to_job(compose(config_name="config", overrides=["+sweep=paper"]))
    assert paper.generation.seeding == "run" and "seeding" not in paper.generation.gen_id_parts("llama", "m")


def test_the_clustered_statistics_resample_tasks_and_flip_task_signs():
    # 3 tasks x 2 epochs: the policy wins both epochs of two tasks and loses one of the third
    pairs = [("a", 1, 0), ("a", 1, 0), ("b", 1, 0), ("b", 1, 0), ("c", 0, 1), ("c", 1, 1)]
    got = clustered.clustered_test(pairs)
    assert got["clusters"] == 3 and got["diff"] == pytest.approx(3 / 6)
    # sign flips of the task sums (2, 2, -1): |sum| >= 3 for (+,+,+), (+,+,-) and their negations: 4 of 8
    assert got["p"] == pytest.approx(0.5)
    assert -1.0 <= got["ci95_low"] <= got["diff"] <= got["ci95_high"] <= 1.0
    assert clustered.sign_flip_p(np.zeros(4)) == 1.0 and clustered.clustered_test(pairs) == got  # seeded
    assert clustered.mde(100, 0.5) == pytest.approx((1.959964 + 0.841621) * np.sqrt(0.005), rel=1e-5)


@pytest.mark.integration
def test_a_sampled_two_epoch_humaneval_sweep_with_feedback_and_its_resampling_control(hydra_ctx, tmp_path, ray_session):
    """shp-sweep provider=sim dataset=humaneval dataset.limit=3 generation.epochs=2 generation.temperature=0.7
    [generation.critic=none], both into one store: 6 trajectories of 3 tasks each; the code section's tests clustered
    by task (the report's correctness section shares its tables: analysis.report.correctness); the two generations
    side by side (python -m sweeps.revise_results)."""
    from sweeps import revise_results
    from sweeps.code_results import render

    gen_ids = {}
    for critic in ("tests", "none"):
        done, store = sweep(
            tmp_path, "provider=sim", "dataset=humaneval", "dataset.limit=3", "generation.epochs=2",
            "generation.temperature=0.7", f"generation.critic={critic}", "generation.max_rounds=3",
            "dataset.split=null", "report.enabled=false",
        )  # fmt: skip
        assert (done.generated, done.failed, done.trajectories) == (6, 0, 6)
        gen_ids[critic] = done.gen_id
        scenarios = {r["scenario_id"]: (r["task_id"], r["epoch"]) for r in store.read("scenarios").to_pylist()}
        assert scenarios["humaneval_1#e2"] == ("humaneval_1", 2) and scenarios["humaneval_1"] == ("humaneval_1", 1)
        rounds = [r for r in store.read("rounds").to_pylist() if r["gen_id"] == done.gen_id]
        assert len(rounds) == 6 * 3 and all(r["critic_prompt_tokens"] == 0 for r in rounds)
        drafts = {(r["scenario_id"], r["round"]): r["draft"] for r in rounds}
        assert drafts[("humaneval_0", 1)] != drafts[("humaneval_0#e2", 1)]  # two epochs, two samples
        if critic == "none":
            assert all(r["feedback"] == "" for r in rounds)
        text = render(Store(str(tmp_path / "store")), gen_id=done.gen_id)
        assert "Writer temperature 0.7 (a seed per task, epoch and round); epochs 2" in text
        assert "cluster sign-flip p" in text and "Minimum detectable difference at 80% power" in text
        assert "Drafts that changed:" in text and f"critic `{critic}`" in text
        # once the store holds several generations, the command names the one rendered
        assert (f"--gen-id {done.gen_id[:12]}" in text) == (critic == "none")
    # round 1 is the same request in both: the control's first drafts are the feedback run's, from the cache
    first = {(r["gen_id"], r["scenario_id"]): r["draft"] for r in store.read("rounds").to_pylist() if r["round"] == 1}
    assert all(first[(gen_ids["none"], s)] == d for (g, s), d in first.items() if g == gen_ids["tests"])
    both = revise_results.render(Store(str(tmp_path / "store")))
    assert "6 with critic `tests` and 6 with critic `none` of the 328 trajectories" in both
    assert both.count("Pass at stop per policy:") == 2 * 2  # two generations x two splits
    assert "| fixed_k1 | 4 (2) | 0.0% | 0.0% | +0.0 [+0.0, +0.0] | 1.00 |" in both  # simulated prose never passes
    assert "| oracle_is |" not in both  # the lexical judge scores no code draft


def test_feedback_against_resampling_pairs_the_same_trajectories_and_clusters_by_task():
    """analysis.stats.feedback.compare over a hand-made correctness relation (real DuckDB): a trajectory only one
    generation holds is left out, never counted as a failure; the difference and its test come from the pairs."""
    import duckdb

    from analysis.stats import feedback

    con = duckdb.connect()
    con.execute("CREATE TABLE scenarios (scenario_id VARCHAR, task_id VARCHAR)")
    con.execute("INSERT INTO scenarios VALUES ('a', 'a'), ('a#e2', 'a'), ('b', 'b'), ('b#e2', 'b'), ('c', 'c')")
    con.execute("CREATE TABLE correctness (gen_id VARCHAR, split VARCHAR, policy VARCHAR, scenario_id VARCHAR, "
                "score VARCHAR, passed BOOLEAN, baseline_passed BOOLEAN, first_passed BOOLEAN)")  # fmt: skip
    rows = [  # (gen, scenario, passed): feedback F wins both epochs of a, ties b; c is only in F (still resuming)
        ("F", "a", True), ("F", "a#e2", True), ("F", "b", True), ("F", "b#e2", False), ("F", "c", False),
        ("R", "a", False), ("R", "a#e2", False), ("R", "b", True), ("R", "b#e2", False),
    ]  # fmt: skip
    for gen, sid, passed in rows:  # round 1 passed where the feedback run passes at its stop
        con.execute("INSERT INTO correctness VALUES (?, 'test', 'fixed_k1', ?, 'hidden_pass', ?, false, ?)",
                    [gen, sid, passed, passed])  # fmt: skip
    (got,) = feedback.compare(con, "hidden_pass", "F", "R")
    assert (got["n"], got["tasks"], got["feedback"], got["resampling"]) == (4, 2, 0.75, 0.25)
    assert got["diff"] == pytest.approx(0.5) and got["ci95_low"] <= 0.5 <= got["ci95_high"]
    assert got["p"] == 1.0  # task sums (2, 0): one task differs, and either sign of it reaches |2|
    # the MDE as every table's: two independent drafts at round 1's pass rate (the feedback run's first_passed)
    assert got["test"] == clustered.CLUSTERED_TEST and got["first"] == 0.75
    assert got["mde"] == pytest.approx(clustered.mde(2, 2 * 0.75 * 0.25))
    assert feedback.compare(con, "hidden_pass", "F", "nobody") == []
