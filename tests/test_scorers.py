"""The built-in scorers and the error rule of score_rows (pure functions, no store)."""

from __future__ import annotations

import pytest

from shp_ray.generation.score_config import ScoreConfigError, ScoreSpec, build, parse
from shp_ray.policy.answer import answer_scores
from shp_ray.policy.scorers import Scorer, Task, score_rows

TASK = Task("q1", "Where is the Louvre?", ("Paris", "Paris, France"))


def values(kind: str, draft: str, task: Task = TASK, **spec: str) -> dict[str, float | None]:
    rows = score_rows([build(ScoreSpec(kind, **spec))], "g", [(task, 1, draft)])
    assert all(r["error"] is None for r in rows), rows
    return {r["score"]: r["value"] for r in rows}


@pytest.mark.parametrize("draft", ["It is in Paris.\nAnswer: Paris", "Answer: the Paris", "no answer line", ""])
def test_hotpot_is_the_signals_em_and_f1(draft) -> None:
    _, em, f1 = answer_scores(draft, "Paris")
    assert values("hotpot", draft) == {"em": em, "f1": f1}


def test_exact_contains_and_regex() -> None:
    assert values("exact", "Reasoning...\nAnswer: paris, FRANCE.") == {"exact": 1.0}  # normalised, any gold answer
    assert values("exact", "Paris") == {"exact": 1.0}  # no answer line: the whole draft
    assert values("exact", "Answer: Lyon", name="right") == {"right": 0.0}
    assert values("contains", "The museum is in Paris, by the Seine.") == {"contains": 1.0}
    assert values("contains", "A Parisian museum.") == {"contains": 0.0}  # word-aligned
    pattern = r"FINAL\[(?P<answer>[^\]]+)\]"
    assert values("regex", "FINAL[Lyon] ... FINAL[Paris]", pattern=pattern) == {"regex": 1.0}  # the last match
    assert values("regex", "no marker", pattern=pattern) == {"regex": 0.0}
    assert values("exact", "Answer: Paris", task=Task("q2")) == {"exact": None}  # no gold answer: unknown


def test_a_failing_scorer_records_the_round_under_the_names_it_gave_elsewhere() -> None:
    def flaky(task: Task, draft: str) -> dict[str, float]:
        if draft == "boom":
            raise RuntimeError("parser crashed")
        if draft == "nan":
            return {"a": float("nan")}
        return {"a": 1.0, "b": 2.0}

    rows = score_rows(
        [Scorer("python", flaky, "python:flaky")], "g", [(TASK, 1, "ok"), (TASK, 2, "boom"), (TASK, 3, "nan")]
    )
    errors = {(r["round"], r["score"]): r["error"] for r in rows if r["error"]}
    assert errors == {
        (2, "a"): "RuntimeError: parser crashed",
        (2, "b"): "RuntimeError: parser crashed",
        (3, "a"): "ValueError: score 'a' must be a finite number, got nan",
        (3, "b"): "ValueError: score 'a' must be a finite number, got nan",
    }
    assert all(r["value"] is None for r in rows if r["error"])
    only_fails = score_rows([Scorer("python", lambda t, d: 1 / 0, "python:x")], "g", [(TASK, 1, "x")])
    assert [(r["score"], r["error"]) for r in only_fails] == [("python", "ZeroDivisionError: division by zero")]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("python:os.path", "score.target: 'os.path' is not package.module:function"),
        ("python:shp_ray.policy.scorers:TASKS", "has no 'TASKS'"),
        ("regex:(x)", "score.pattern: '(x)': no named group (?P<answer>...)"),
        ("bleu", "score.kind: unknown kind 'bleu'"),
    ],
)
def test_a_spec_that_cannot_be_built_says_which_key(text, says) -> None:
    with pytest.raises(ScoreConfigError) as err:
        build(parse(text))
    assert says in str(err.value)


PLUGIN = """
import os, time

def score(task, draft):
    if draft == "hang":
        time.sleep(3600)
    if draft == "leak":
        raise RuntimeError("the grader refused api_key=sk-proj-abcdefghijklmnop0123456789 at https://u:pw@h.example")
    if draft == "gone":
        os._exit(3)
    return {"len": float(len(draft))}
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch) -> str:
    """A python scorer's module on the path, named per test (a process keeps one worker per target)."""
    name = f"plugin_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{name}:score"


def test_a_python_scorer_that_never_returns_is_an_error_row_naming_the_timeout_and_scoring_goes_on(plugin) -> None:
    scorer = build(ScoreSpec("python", target=plugin, timeout_s=2.0))
    items = [(TASK, 1, "ok"), (TASK, 2, "hang"), (TASK, 3, "gone"), (TASK, 4, "fine")]
    rows = {r["round"]: (r["value"], r["error"]) for r in score_rows([scorer], "g", items)}
    assert rows[1] == (2.0, None) and rows[4] == (4.0, None)  # a new worker after each loss
    assert rows[2][0] is None and rows[2][1].startswith("TimeoutError: the scorer python:")
    assert "did not return within 2 s (score.timeout_s)" in rows[2][1]
    assert rows[3][0] is None and "process ended during the call (exit code 3)" in rows[3][1]


def test_a_python_scorers_error_is_stored_redacted(plugin) -> None:
    (row,) = score_rows([build(ScoreSpec("python", target=plugin))], "g", [(TASK, 1, "leak")])
    assert row["value"] is None and row["error"].startswith("RuntimeError: the grader refused")
    assert "sk-proj" not in row["error"] and "pw@" not in row["error"] and "<redacted>" in row["error"]


def test_every_built_scorer_redacts_and_a_bad_timeout_is_refused(plugin) -> None:
    assert build(ScoreSpec("hotpot")).redact("token=abc123secret") == "token=<redacted>"
    for bad in (0, -1.0, float("inf"), float("nan"), True):
        with pytest.raises(ScoreConfigError, match="score.timeout_s: must be a number of seconds above 0"):
            build(ScoreSpec("python", target=plugin, timeout_s=bad))
