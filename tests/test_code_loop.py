"""The code loop: a Writer's function run against its task's visible tests in the sandbox each round, the Critic
as that report (critic=tests) or an LLM with it in hand (critic=llm_tests), and the tests scorer's hidden_pass /
visible_pass per round. In-process with scripted replies, then swept end to end on the simulated server and on the
embedded model."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest
from hydra import compose, initialize_config_module

import conf.schema  # noqa: F401
from conf.resolve import ConfigError, to_job
from shp_ray.generation import code_tests as ct
from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.humaneval import hidden_test, load_humaneval
from shp_ray.generation.loop import generate_trajectory, live_trajectory
from shp_ray.generation.prompts import preset
from shp_ray.generation.records import trajectory_rows
from shp_ray.generation.score_config import ScoreSpec, build
from shp_ray.policy.cascade import HaltConfig
from shp_ray.policy.scorers import score_rows, task_of
from shp_ray.policy.table import policy_by_name
from shp_ray.providers.sim.scripted import ScriptedProvider
from shp_ray.sandbox import ERROR_CLASSES
from storage import Store
from sweeps import app
from sweeps import job as sweep_job
from sweeps.job import snapshot

WRONG = "Here it is:\n```python\ndef has_close_elements(numbers, threshold):\n    return False\n```\nDone."
CODE = GenerationConfig(prompts=preset("code-v1"), critic="tests", max_rounds=3)


@pytest.fixture(scope="module")
def tasks():
    return {s.meta["task_id"]: s for s in load_humaneval(0.25)}


@pytest.fixture(scope="module")
def hydra_ctx():
    with initialize_config_module(config_module="conf", version_base="1.3"):
        yield


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


class Services:
    """The loop's world: the scripted provider's chat, a constant embedding, no judge."""

    def __init__(self, provider: ScriptedProvider) -> None:
        self.provider = provider
        self.completions = []

    async def chat(self, request):
        self.completions.append(await self.provider.complete(request))
        return self.completions[-1]

    async def embed(self, text: str) -> np.ndarray:
        return np.full(384, 1 / np.sqrt(384), dtype=np.float32)

    async def judge(self, scenario, draft):
        return None


def writer_then_right(scn, critique: str = "PROBLEMS: the second test fails.") -> ScriptedProvider:
    """Round 1 writes a wrong function, every later round the reference; a Critic (llm_tests) says ``critique``."""

    def reply(request) -> str:
        system, user = request.messages[0][1], request.messages[-1][1]
        if "You are the Critic" in system:
            return critique
        return WRONG if re.search(r"^Round: 1$", user, re.MULTILINE) else fenced(scn.ground_truth)

    return ScriptedProvider(reply)


def test_the_code_is_taken_from_the_draft_and_completes_the_prompt(tasks):
    assert ct.extract_code("Sure.\n```python\nimport math\ndef f(x):\n    return 1\n```\nBye") == (
        "import math\ndef f(x):\n    return 1"
    )
    two = "```text\nnotes\n```\nthen\n```py\ndef g():\n    pass\n```\n```python\ndef f():\n    return 2\n```"
    assert ct.extract_code(two, "f") == "def f():\n    return 2" and ct.extract_code(two) == "def g():\n    pass"
    assert ct.extract_code("```python\ndef f():\n    return 1") == "def f():\n    return 1"  # cut at max_tokens
    assert ct.extract_code("def f():\n    return 1\n") == "def f():\n    return 1"  # no fence: the whole draft
    scn = tasks["HumanEval/0"]
    whole = ct.program(scn.question, "has_close_elements", WRONG)
    assert whole.startswith("from typing import List\n") and whole.count("def has_close_elements(") == 1
    body = ct.program(scn.question, "has_close_elements", "    return False\n")  # a bare body completes the prompt
    assert body.startswith(scn.question) and body.endswith("    return False\n")


@pytest.mark.parametrize("marker", ["APPROVED", "Visible"])
def test_the_critique_carries_the_approval_marker_exactly_when_every_visible_test_passes(tasks, marker):
    scn = tasks["HumanEval/0"]
    passed = ct.visible_report(scn.question, scn.meta, fenced(scn.ground_truth))
    failed = ct.visible_report(scn.question, scn.meta, WRONG)
    assert passed.all_passed and ct.critique(passed, marker) == f"{marker}: all 2 visible tests pass."
    text = ct.critique(failed, marker)
    assert not text.lower().startswith(marker.lower())  # even when the marker is the report's first word
    assert "1 of 2 passed (wrong_answer)" in text
    assert "- has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3) should be True, got False" in text
    none = tasks["HumanEval/38"]  # no visible test: never approved, and the report says so
    report = ct.visible_report(none.question, none.meta, fenced(none.ground_truth))
    assert report.total == 0 and not report.all_passed
    assert ct.critique(report, "APPROVED") == "No visible tests for this task: the code loads and defines the function."
    broken = ct.critique(ct.visible_report(scn.question, scn.meta, "def has_close_elements(:"), "APPROVED")
    assert broken.startswith("Visible tests: 0 of 2 passed (syntax).\nSyntaxError")


def test_the_tests_scorer_gives_hidden_and_visible_pass_labelled_with_the_error_class(tasks):
    scorer = build(ScoreSpec("tests"))
    items = []
    for task_id, draft in (("HumanEval/0", tasks["HumanEval/0"].ground_truth), ("HumanEval/0", WRONG),
                           ("HumanEval/38", tasks["HumanEval/38"].ground_truth),
                           ("HumanEval/2", "def truncate_number(number):\n    while True:\n        pass")):  # fmt: skip
        s = tasks[task_id]
        items.append((task_of(s.scenario_id, s.question, s.ground_truth, s.references, s.meta), len(items) + 1, draft))
    rows = {(r["round"], r["score"]): (r["value"], r["label"]) for r in score_rows([scorer], "g", items)}
    assert rows[(1, "hidden_pass")] == (1.0, "pass") and rows[(1, "visible_pass")] == (1.0, "pass")
    assert rows[(2, "hidden_pass")] == (0.0, "wrong_answer") and rows[(2, "visible_pass")] == (0.5, "wrong_answer")
    assert rows[(3, "hidden_pass")] == (1.0, "pass") and rows[(3, "visible_pass")] == (None, ct.NO_TESTS)
    assert rows[(4, "hidden_pass")][0] == 0.0 and rows[(4, "hidden_pass")][1] in ("timeout", "killed")  # bounded
    assert rows[(4, "visible_pass")] == (0.0, "timeout")  # the example's own alarm
    assert {r["scorer"] for r in score_rows([scorer], "g", items[:1])} == {ct.TESTS_SCORER}


def test_critic_tests_makes_no_critic_call_and_approves_the_round_whose_tests_pass(tasks):
    scn = tasks["HumanEval/0"]
    provider = writer_then_right(scn)
    out = asyncio.run(generate_trajectory(scn, CODE, "m", Services(provider)))
    assert not out.failed and [r.round for r in out.rounds] == [1, 2, 3]
    assert all("You are the Writer" in c.messages[0][1] for c in provider.calls) and len(provider.calls) == 3
    assert out.rounds[0].feedback.startswith("Visible tests: 1 of 2 passed (wrong_answer).")
    assert out.rounds[1].feedback == "APPROVED: all 2 visible tests pass." and out.rounds[2].feedback == ""
    assert "Review of your previous code:\nVisible tests: 1 of 2" in provider.calls[1].messages[1][1]  # f_1 reaches x_2
    rows = trajectory_rows(out, "g", 384, "e", approval="APPROVED", scorers=[build(ScoreSpec("tests"))])
    assert [r["approved"] for r in rows["signals"]] == [False, True, False]
    assert all(r["critic_prompt_tokens"] + r["critic_completion_tokens"] == 0 for r in rows["rounds"])
    hidden = {r["round"]: (r["value"], r["label"]) for r in rows["scores"] if r["score"] == "hidden_pass"}
    assert hidden == {1: (0.0, "wrong_answer"), 2: (1.0, "pass"), 3: (1.0, "pass")}


def test_critic_llm_tests_hands_the_llm_the_report_and_never_the_hidden_test(tasks):
    scn = tasks["HumanEval/0"]
    provider = writer_then_right(scn)
    cfg = GenerationConfig(prompts=preset("code-v1"), critic="llm_tests", max_rounds=3)
    out = asyncio.run(generate_trajectory(scn, cfg, "m", Services(provider)))
    critics = [c for c in provider.calls if "You are the Critic" in c.messages[0][1]]
    assert len(critics) == 2 and out.rounds[0].feedback == "PROBLEMS: the second test fails."
    assert "Visible tests:\nVisible tests: 1 of 2 passed (wrong_answer)." in critics[0].messages[1][1]
    assert (
        "Visible tests:\nAPPROVED: all 2 visible tests pass." not in critics[1].messages[1][1]
    )  # a report, no verdict
    assert "Visible tests: 2 of 2 passed (pass)." in critics[1].messages[1][1]
    sent = "\n".join(content for c in provider.calls for _, content in c.messages)
    assert hidden_test("HumanEval/0") not in sent and "check(candidate)" not in sent


def test_live_mode_stops_on_the_test_reports_approval(tasks):
    scn = tasks["HumanEval/0"]
    provider = writer_then_right(scn)
    policy = policy_by_name("critic_only", HaltConfig(max_rounds=3))
    services = Services(provider)
    live = asyncio.run(live_trajectory(scn, policy, CODE, "m", services))
    # f_2 approves x_2; the cascade reads f_{t-1} at round t: halt at round 3, no Critic call ever made
    assert (live.stop_round, live.reason) == (3, "critic") and len(provider.calls) == 3
    assert live.operational_tokens == sum(c.usage.total_tokens for c in services.completions)


def test_the_critic_mode_enters_gen_id_and_humaneval_picks_the_code_loops_defaults(hydra_ctx):
    base = GenerationConfig()
    assert "critic" not in base.gen_id_parts("sim", "m")  # llm: the gen_ids of existing stores stay
    ids = {GenerationConfig(critic=c).gen_id("sim", "m") for c in ("llm", "tests", "llm_tests")}
    assert len(ids) == 3
    job = to_job(compose(config_name="config", overrides=["dataset=humaneval"]))
    assert (job.dataset, job.generation.prompts.name, job.generation.critic) == ("humaneval", "code-v1", "tests")
    assert [s.kind for s in job.generation.scores] == ["tests"]
    mine = to_job(compose(config_name="config", overrides=["dataset=humaneval", "generation.critic=llm", "score=none"]))
    assert (mine.generation.critic, mine.generation.scores) == ("llm", ())
    qa = to_job(compose(config_name="config", overrides=[]))
    assert (qa.generation.prompts.name, qa.generation.critic, qa.generation.scores) == ("shp-wc-v3", "llm", ())
    for overrides, key in ((["generation.critic=tests"], "generation.critic"), (["score=tests"], "score.kind")):
        with pytest.raises(ConfigError, match=rf"^{key}: .*only the tasks of \['humaneval'\] carry"):
            to_job(compose(config_name="config", overrides=overrides))
    modes = r"\['llm', 'tests', 'llm_tests', 'none'\]"
    with pytest.raises(ConfigError, match=rf"^generation.critic: must be one of {modes}"):
        to_job(compose(config_name="config", overrides=["dataset=humaneval", "generation.critic=judge"]))
    local = compose(config_name="config", overrides=["+sweep=humaneval_local"])
    assert (local.provider.model, local.generation.max_rounds, local.generation.critic) == (
        "qwen2.5-coder-1.5b-instruct", 4, "tests",
    )  # fmt: skip


def sweep(tmp_path, *overrides: str):
    cfg = compose(config_name="config", overrides=[f"store.path={tmp_path / 'store'}", *overrides])
    job = to_job(cfg)
    done = sweep_job.run(job, output_dir=tmp_path / "out", job_tag="t", config_snapshot=snapshot(cfg), command="t")
    return done, Store(tmp_path / "store")


@pytest.mark.integration
def test_a_humaneval_sweep_on_the_simulated_server_stores_rounds_with_scores(hydra_ctx, tmp_path, ray_session, capsys):
    done, store = sweep(tmp_path, "provider=sim", "dataset=humaneval", "dataset.limit=5", "report.enabled=false")
    assert (done.generated, done.failed) == (5, 0)
    rounds = store.read("rounds").to_pylist()
    assert len(rounds) == 5 * 6 and all(r["critic_prompt_tokens"] == 0 for r in rounds)
    assert all(r["feedback"].startswith(("Visible tests:", "No visible tests")) for r in rounds if r["round"] < 6)
    scores = store.read("scores").to_pylist()
    assert len(scores) == 5 * 6 * 2 and {r["score"] for r in scores} == {"hidden_pass", "visible_pass"}
    # the simulated server writes prose, not Python: every draft fails to compile, and says so
    assert {(r["value"], r["label"]) for r in scores} == {(0.0, "syntax")}
    # the console table speaks the task's own score, and no answer F1 (code has no Answer: line: F1 0 by rule)
    assert all(r["mean_f1"] == 0.0 and r["share_answer_line"] == 0.0 for r in done.summary)
    capsys.readouterr()
    app._print_table(done)
    out = capsys.readouterr().out.splitlines()
    head = out[2].split()
    assert done.primary == "hidden_pass" and head[7:9] == ["hidden_pass", "dhidden_pass"], head
    assert "F1" not in head and any("F1: left out" in line for line in out)
    shp = next(line.split() for line in out if line.startswith("shp "))
    assert shp[7:9] == ["0.000", "+0.000"]  # every draft fails its hidden tests
    # the code section: the test split as the generation's config records it; the lexical judge cannot score code
    # (no contexts), so no draft has an IS and there is no oracle_is row (it would be fixed_k1 under another name)
    from sweeps.code_results import render

    text = render(Store(str(tmp_path / "store")))
    assert "critic `tests`; test split `docstring` (visible tests: the docstring's examples, the whole check" in text
    assert "scored none of these drafts (no IS column, no oracle_is row)" in text and "| oracle_is |" not in text
    assert "| IS |" not in text
    assert "| oracle_hidden_pass | oracle |" in text and "| fixed_k1 | cascade |" in text


@pytest.mark.integration
def test_a_humaneval_sweep_on_the_embedded_model(hydra_ctx, tmp_path, ray_session):
    """The smallest embedded model (SmolLM2-135M: tiny, often wrong) on 2 problems x 2 rounds."""
    done, store = sweep(
        tmp_path, "dataset=humaneval", "dataset.limit=2", "generation.max_rounds=2", "provider.n_threads=1",
        "report.enabled=false",
    )  # fmt: skip
    assert (done.generated, done.failed) == (2, 0)
    rounds = store.read("rounds").to_pylist()
    assert len(rounds) == 4 and all(r["writer_completion_tokens"] > 0 for r in rounds)
    scores = store.read("scores").to_pylist()
    assert len(scores) == 2 * 2 * 2
    hidden = [r for r in scores if r["score"] == "hidden_pass"]
    assert all(r["value"] in (0.0, 1.0) and r["label"] in ERROR_CLASSES for r in hidden)
