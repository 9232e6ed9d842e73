"""Each draft's extracted answer, stored once (``draft_answers``), and the answer-based families that read it.

- the shipped store (written before answers were stored), copied: ``shp-import --rescore`` adds its answers from
  the stored drafts alone (no part but the new table's is written, no model is called), and the four families then
  replay on it, in DuckDB as in the reference executor;
- the extractors: the QA reading, a code draft's AST hash (layout and comments aside; names kept; unparsable: no
  answer), a user's ``answer.target`` bounded in its own process, and which one a replay reads when a generation
  has several.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

import analysis
from shp_ray.generation.answer_config import (
    CODE_EXTRACTOR,
    AnswerSpec,
    answer_rows,
    build,
    code_answer,
    parse,
    pick_extractor,
)
from shp_ray.generation.records import load_trajectories
from shp_ray.importer.cli import main
from shp_ray.policy.answer import QA_EXTRACTOR, qa_answer
from shp_ray.policy.reference import replay
from shp_ray.policy.scorers import Task
from shp_ray.policy.table import policy_by_name
from storage.answers_schema import DRAFT_ANSWERS
from storage.parts import Store
from tests.test_families_property import make_encoder, write_store

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "results/paper-local/store"
JUDGE = "llm:qwen2.5-coder-1.5b-instruct"
ANSWER_FAMILIES = ("answer_stable", "answer_runlength", "adaptive_consistency", "sprt")
REASONS = {"answer_stable": {"answer_stable"}, "answer_runlength": {"answer_run"},
           "adaptive_consistency": {"consistent"}, "sprt": {"settled", "unsettled"}}  # fmt: skip


def _parts(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_cache" not in p.parts}


def test_rescoring_a_copy_of_the_shipped_store_adds_answers_and_the_families_replay(tmp_path, capsys) -> None:
    copy = tmp_path / "store"
    shutil.copytree(SHIPPED, copy)
    # the shipped store holds its answers (rescored once): taken out of the copy, they come back the same, no model call
    shipped = Store(str(copy)).read("draft_answers").to_pylist()
    shutil.rmtree(copy / "draft_answers")
    before = _parts(copy)
    (gen,) = Store(str(copy)).read("generations").column("gen_id").to_pylist()
    assert main(["--rescore", gen[:8], "--store", str(copy)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"answers of generation {gen}: 480 new rows") and "(no model call)" in out
    added = _parts(copy) - before
    assert before <= _parts(copy) and added and all(p.startswith("draft_answers/") for p in added)
    assert main(["--rescore", gen, "--store", str(copy)]) == 0  # what is stored is not extracted twice
    assert f"answers of generation {gen}: 0 new rows" in capsys.readouterr().out
    stored = Store(str(copy)).read("draft_answers").to_pylist()
    assert len(stored) == 480 and {r["extractor"] for r in stored} == {QA_EXTRACTOR}
    drafts = {(r["scenario_id"], r["round"]): r["draft"] for r in Store(str(copy)).read("rounds").to_pylist()}
    assert all(r["answer"] == qa_answer(drafts[(r["scenario_id"], r["round"])]) for r in stored)
    assert sorted((r["scenario_id"], r["round"], r["answer"] or "") for r in stored) == sorted(
        (r["scenario_id"], r["round"], r["answer"] or "") for r in shipped
    )

    pols = [policy_by_name(n) for n in ("fixed_k6", *ANSWER_FAMILIES)]
    con = analysis.connect(str(copy), judge=JUDGE, policies=pols)
    try:
        rows = con.sql("SELECT policy, scenario_id, stop_round, reason FROM replay").fetchall()
    finally:
        con.close()
    assert len(rows) == 80 * len(pols)
    ref = load_trajectories(Store(str(copy)), gen, judge=JUDGE)
    named = {p.name: p for p in pols}
    for name, sid, tau, reason in rows:
        want = replay(named[name], ref[sid])
        assert (tau, reason) == (want.stop_round, want.reason), (name, sid)
    for family in ANSWER_FAMILIES:  # each family stops early somewhere on the real drafts, by its own rule
        reasons = {r for n, _, _, r in rows if n == family}
        assert reasons & REASONS[family], (family, reasons)
        assert reasons <= REASONS[family] | {"failsafe"}


def test_the_code_reading_hashes_the_program_not_its_layout() -> None:
    task = Task("t", 'def add(a, b):\n    """Add."""\n', meta={"entry_point": "add"})
    plain = "```python\ndef add(a, b):\n    return a + b\n```"
    spaced = "Here it is:\n```python\ndef add(a,b):   # sum\n\n    return (a + b)\n```\nDone."
    renamed = "```python\ndef add(x, y):\n    return x + y\n```"
    body = "    return a + b\n"  # the body alone completes the prompt, as the verifier runs it
    assert code_answer(task, plain) == code_answer(task, spaced) != code_answer(task, renamed)
    assert code_answer(task, body) is not None and len(code_answer(task, plain) or "") == 64
    assert code_answer(task, "```python\ndef add(a, b) return\n```") is None  # does not parse: no answer
    auto = build(AnswerSpec())
    assert auto.extract(task, plain) == (CODE_EXTRACTOR, code_answer(task, plain))
    assert auto.extract(Task("q"), "So the answer: The Eiffel Tower.") == (QA_EXTRACTOR, "eiffel tower")
    assert build(parse("qa")).extract(task, plain)[0] == QA_EXTRACTOR


def test_a_users_extractor_runs_bounded_and_its_errors_are_rows(tmp_path) -> None:
    mine = tmp_path / "mine.py"
    mine.write_text(textwrap.dedent('''
        import time

        def first_word(task, draft):
            if "hang" in draft:
                time.sleep(60)
            if "boom" in draft:
                raise RuntimeError("no answer here")
            if "number" in draft:
                return 7
            return draft.split()[0].lower() if draft.split() else None
    '''))  # fmt: skip
    extractor = build(AnswerSpec("python", f"{mine}:first_word", timeout_s=2.0))
    tasks = [(Task("s"), t, d) for t, d in enumerate(["Paris is it", "", "boom", "number", "hang"], start=1)]
    rows = answer_rows(extractor, "g", tasks)
    name = f"python:{mine}:first_word"
    assert [(r["extractor"], r["answer"]) for r in rows] == [(name, "paris")] + [(name, None)] * 4
    assert [r["error"] is None for r in rows] == [True, True, False, False, False]
    assert "no answer here" in rows[2]["error"] and "str or None" in rows[3]["error"]
    assert "did not return within 2 s" in rows[4]["error"]
    with pytest.raises(ValueError, match="answer.target"):
        build(AnswerSpec("python", f"{tmp_path}/absent.py:f"))
    with pytest.raises(ValueError, match="answer.kind"):
        build(AnswerSpec("regex"))


def test_a_users_answers_are_read_before_the_tasks_own(tmp_path) -> None:
    assert pick_extractor([QA_EXTRACTOR, CODE_EXTRACTOR, "python:b", "python:a"]) == "python:a"
    assert pick_extractor([QA_EXTRACTOR, CODE_EXTRACTOR]) == CODE_EXTRACTOR
    trajs = [("s0", ["Answer: Paris", "Answer: Paris", "Answer: Paris"], ["Add more.", "Add more.", ""],
              [(5, 3)] * 3, [0.5] * 3, [], ["paris"] * 3)]  # fmt: skip
    write_store(str(tmp_path), trajs, make_encoder(0.01))
    mine = [{"gen_id": "g", "scenario_id": "s0", "round": t, "extractor": "python:mine.py:f", "answer": a,
             "error": None} for t, a in enumerate(["x", "y", "z"], start=1)]  # fmt: skip
    Store(str(tmp_path)).write("draft_answers", pa.Table.from_pylist(mine, schema=DRAFT_ANSWERS), DRAFT_ANSWERS)
    pol = policy_by_name("answer_stable")
    con = analysis.connect(str(tmp_path), policies=[pol])
    try:
        got = con.sql("SELECT stop_round, reason FROM replay").fetchall()
    finally:
        con.close()
    want = replay(pol, load_trajectories(Store(str(tmp_path)), "g", judge="j")["s0"])
    assert got == [(3, "failsafe")] == [(want.stop_round, want.reason)]  # x, y, z never agree; paris would at 2


def _stop(policy: str, answers: list[str | None], max_rounds: int = 6) -> tuple[int, str]:
    """Where the family engine halts a trajectory whose drafts state ``answers`` (a zero encoder: no embedding read)."""
    import numpy as np

    from shp_ray.policy.families.engine import StoredRounds, run_trajectory

    p = policy_by_name(policy)
    n = len(answers)
    rounds = StoredRounds(["d"] * n, [np.ones(4, np.float32)] * n, [None] * n, [0] * n, answers=answers)
    tau, reason, _, _ = run_trajectory(p.kind, p.param_dict, rounds, cap=min(n, max_rounds), horizon=max_rounds)
    return tau, reason


@pytest.mark.parametrize("policy", ANSWER_FAMILIES)
def test_a_draft_with_no_answer_never_agrees(policy) -> None:
    assert _stop(policy, [None] * 6)[1] in ("failsafe", "unsettled")  # sprt: no agreement at all is evidence too
    assert _stop(policy, ["a", None, "a", None, "a", None])[1] in ("failsafe", "unsettled")


def test_the_rules_at_their_edges() -> None:
    assert _stop("answer_stable@w=3", ["a", "a", "b", "b", "b", "b"]) == (5, "answer_stable")
    assert _stop("answer_runlength@r=2", ["a", "b", "a", "a", "b", "b"]) == (4, "answer_run")
    # P(stays modal) at counts (v1, v2), prior 1: (1,0) .75, (2,1) .6875, (3,1) .8125, (4,1) .89, (5,1) .9375,
    # (3,2) .656, (4,2) .773; a tie is 1/2: an early dissent holds the loop back
    assert _stop("adaptive_consistency@threshold=0.9", ["b", "a", "a", "b", "a", "a"]) == (6, "failsafe")
    assert _stop("adaptive_consistency@threshold=0.9", ["a", "b", "b", "b", "b", "b"]) == (6, "consistent")
    assert _stop("adaptive_consistency@threshold=0.9", ["a", "a", "a", "b", "a", "a"]) == (3, "consistent")
    # 0.75 at one agreeing draft: a threshold at exactly that stops at round 1 (>=, in every executor)
    assert _stop("adaptive_consistency@threshold=0.75", ["a"] * 6) == (1, "consistent")
    assert _stop("sprt", ["a", "a", "a", "a", "a", "a"]) == (5, "settled")
    assert _stop("sprt", ["a", "b", "c", "a", "b", "c"]) == (3, "unsettled")
    # a tie of modes: agreeing with either counts (b after a, b): log-ratio -2.08 at round 2 (above the lower bound
    # -2.64), then +1.50 per agreement: -0.58, 0.93, 2.43 >= 1.15 at round 5
    assert _stop("sprt@p0=0.2,p1=0.9,alpha=0.3,beta=0.05", ["a", "b", "b", "b", "b", "b"]) == (5, "settled")
