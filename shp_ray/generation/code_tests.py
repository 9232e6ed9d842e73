"""The code loop's verifier: a draft's code run against its task's tests in the sandbox.

A code task (``dataset=humaneval``) carries in its metadata the function's name (``entry_point``) and its
VISIBLE tests (``examples``: ``[call, expected]`` pairs); its HIDDEN test is looked up by ``task_id``
(:func:`shp_ray.generation.humaneval.hidden_test`) and is never part of any prompt.

- :func:`extract_code`: the Writer's draft -> the code (the ```python fenced block that defines the function,
  else the first fenced block, else the whole draft);
- :func:`program`: what runs -- the task's preamble (the prompt's imports and helper functions before the
  signature), then the code; a draft that holds only the function's body is completed onto the prompt;
- :func:`visible_report` runs the visible tests, :func:`report_text` says what happened in a few lines,
  :func:`critique` turns that into the Critic's reply when the Critic IS the test report (``critic=tests``):
  it starts with the preset's approval marker exactly when every visible test passes;
- :func:`tests_scorer` is score kind ``tests``: per round ``hidden_pass`` (1.0 / 0.0, labelled with the hidden
  run's error class; under ``tests=split`` the private half of the check decides it, :mod:`.check_split`) and
  ``visible_pass`` (the share of visible tests passed; unknown without visible tests).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shp_ray.generation.check_split import scored_test
from shp_ray.generation.humaneval import hidden_test, preamble
from shp_ray.policy.scorers import Scored, Scorer, Task
from shp_ray.sandbox import Example, Limits, TestReport, run_check, run_examples

TESTS_SCORER = "tests:v1"  # the stored scorer identity (what computed hidden_pass / visible_pass)
NO_TESTS = "no_visible_tests"  # visible_pass's label when the task has none
MAX_LISTED = 5  # failed visible tests listed in a report

_FENCE = re.compile(r"```[ \t]*(?P<lang>[\w+-]*)[ \t]*\n(?P<code>.*?)(?:```|\Z)", re.DOTALL)


class CodeTaskError(ValueError):
    """A task without what the code loop needs (an entry point); the message names what is missing."""


def entry_point(meta: Mapping[str, Any]) -> str:
    name = meta.get("entry_point")
    if not isinstance(name, str) or not name.isidentifier():
        raise CodeTaskError(f"a code task needs meta.entry_point, the function's name; got {name!r}")
    return name


def examples(meta: Mapping[str, Any]) -> list[Example]:
    """The task's visible tests."""
    return [Example(str(call), str(want)) for call, want in meta.get("examples") or ()]


def extract_code(draft: str, name: str = "") -> str:
    """The code in a draft: the fenced block that defines ``name`` (else the first python or unlabelled block,
    else the first block), or the whole draft when it has no fence."""
    blocks = [(m.group("lang").lower(), m.group("code")) for m in _FENCE.finditer(draft)]
    if not blocks:
        return draft.strip("\n")
    if name:
        for _, code in blocks:
            if re.search(rf"^\s*def\s+{re.escape(name)}\s*\(", code, re.MULTILINE):
                return code.strip("\n")
    python = [code for lang, code in blocks if lang in ("python", "py", "python3", "")]
    return (python or [blocks[0][1]])[0].strip("\n")


def program(question: str, name: str, draft: str) -> str:
    """The program a round runs: the prompt's preamble and the draft's code (a bare body completes the prompt)."""
    code = extract_code(draft, name)
    if re.search(rf"^\s*def\s+{re.escape(name)}\s*\(", code, re.MULTILINE):
        return preamble(question, name) + "\n" + code + "\n"
    return question + code + "\n"


def visible_report(question: str, meta: Mapping[str, Any], draft: str, limits: Limits | None = None) -> TestReport:
    """The draft run against the task's visible tests (no tests: the code is still loaded, its errors named)."""
    name = entry_point(meta)
    return run_examples(program(question, name, draft), name, examples(meta), limits or Limits())


def report_text(report: TestReport) -> str:
    """A few lines a Writer or Critic can act on: how many visible tests passed, and the first failures."""
    if report.total == 0:
        loaded = report.error_class in ("pass", "wrong_answer")
        head = "No visible tests for this task" + (
            ": the code loads and defines the function."
            if loaded
            else f"; running the code failed ({report.error_class})."
        )
        return head if loaded or not report.detail else f"{head}\n{report.detail}"
    lines = [f"Visible tests: {report.passed} of {report.total} passed ({report.error_class})."]
    if report.detail:
        lines.append(report.detail)
    failed = [r for r in report.examples if not r.ok]
    for r in failed[:MAX_LISTED]:
        lines.append(f"- {r.example.call} should be {r.example.expected}, got {r.got}")
    if len(failed) > MAX_LISTED:
        lines.append(f"- ... and {len(failed) - MAX_LISTED} more")
    return "\n".join(lines)


def critique(report: TestReport, approval: str) -> str:
    """The Critic's reply when the Critic is the test report: the approval marker first iff every visible test
    passed (the cascade's critic level reads exactly that), else the report, never starting with the marker."""
    if report.all_passed:
        return f"{approval}: all {report.total} visible tests pass."
    text = report_text(report)
    return f"- {text}" if text.lower().startswith(approval.lower()) else text


def hidden_program(question: str, name: str, task_id: str, test: str | None = None) -> str:
    """The hidden test as it runs. HumanEval ran prompt, completion and test in one namespace, so its checks
    call the prompt's helpers (``poly``, ``encode_cyclic``) and its imports, and some call the function by its
    own name (``sort_third``): the prompt's preamble comes first, and ``check`` binds that name to the candidate
    before the original check runs. The sandbox runs this apart from the candidate's namespace. ``test``: the check
    to run (``tests=split``: its private half), else the task's whole check."""
    bind = (
        f"\n\ndef check(candidate, _check=check):\n    globals()[{name!r}] = candidate\n    return _check(candidate)\n"
    )
    return preamble(question, name) + "\n" + (hidden_test(task_id) if test is None else test) + bind


def _tests(task: Task, draft: str) -> dict[str, Scored]:
    name = entry_point(task.meta)
    task_id = task.meta.get("task_id")
    code = program(task.question, name, draft)
    hidden = run_check(code, name, hidden_program(task.question, name, str(task_id), scored_test(task.meta)))
    visible = run_examples(code, name, examples(task.meta)) if examples(task.meta) else None
    return {
        "hidden_pass": Scored(float(hidden.all_passed), hidden.error_class),
        "visible_pass": Scored(None, NO_TESTS) if visible is None else Scored(visible.pass_rate, visible.error_class),
    }


def tests_scorer() -> Scorer:
    """Score kind ``tests``: hidden_pass and visible_pass of every stored draft, each labelled with its error class."""
    return Scorer("tests", _tests, TESTS_SCORER, ("hidden_pass", "visible_pass"))
