"""The shipped run's headline is what its query prints: README.md's headline block (between ``<!-- headline -->``
and ``<!-- /headline -->``) holds the sentence sweeps.paper_headline renders from HEADLINE_QUERY on
results/paper-local/store and that very query (tests/test_docs.py runs it and compares its output); RESULTS.md
prints the same sentence. And the lenient answers it reads are the Python reading of every shipped draft.

The store is opened read-only (a connection writes nothing into it), so these tests read it in place.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analysis import ReplayScope, connect
from analysis.stats.answer_outcomes import answer_dynamics
from shp_ray.policy.answer import lenient_answer, lenient_answer_scores
from sweeps.paper_headline import HEADLINE_QUERY, headline_rows, headline_sentence

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
STORE = "results/paper-local/store"
JUDGE = "llm:qwen2.5-coder-1.5b-instruct"
OPEN, CLOSE = "<!-- headline -->", "<!-- /headline -->"


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    con = connect(ROOT / STORE, judge=JUDGE)  # what `shp-query --judge` opens: every default
    try:
        return headline_rows(con)
    finally:
        con.close()


def readme_headline() -> tuple[str, str]:
    """(the sentence, the command of the runnable block) of README.md's headline block."""
    text = (ROOT / "README.md").read_text()
    if OPEN not in text or CLOSE not in text:
        pytest.fail(
            f"README.md has no headline block ({OPEN} ... {CLOSE}): paste the sentence and the query of RESULTS.md's "
            "'The headline' section there (python -m sweeps.paper_results results/paper-local/store renders them)"
        )
    block = text.split(OPEN, 1)[1].split(CLOSE, 1)[0]
    sentence, _, rest = block.partition("<!-- runnable -->")
    command = re.search(r"```bash\n(.*?)\n```", rest, re.S)
    assert command, "README.md's headline block has no runnable bash block under its sentence"
    return _flat(sentence), command.group(1)


def test_the_readme_headline_is_what_its_query_prints(rows) -> None:
    sentence, command = readme_headline()
    assert sentence == headline_sentence(rows, JUDGE), "README.md's headline sentence is not what its query prints"
    assert f"--store {STORE} --judge '{JUDGE}'" in command
    query = command.split('"', 1)[1].rsplit('"', 1)[0]
    assert _flat(query) == _flat(HEADLINE_QUERY), "README.md's headline query is not sweeps.paper_headline's"


def test_results_md_prints_the_same_headline(rows) -> None:
    results = (ROOT / "RESULTS.md").read_text()
    assert headline_sentence(rows, JUDGE) in results
    assert HEADLINE_QUERY.splitlines()[-1].strip() in results


def test_the_headline_reads_one_split_and_prices_the_judge(rows) -> None:
    by = {r["policy"]: r for r in rows}
    assert {int(r["n"]) for r in rows} == {60}  # the test split only: dev and test never pooled
    assert set(by) == {"fixed_k1", "entropy_only", "shp", "fixed_k6", "oracle_is"}
    assert by["fixed_k6"]["saving"] == 0 and by["fixed_k6"]["delta_f1"] == 0
    # The LLM judge's tokens are paid by the policies that consult it: the oracle costs more than six rounds.
    assert by["oracle_is"]["saving"] < 0 < by["shp"]["saving"] < by["fixed_k1"]["saving"]
    con = connect(ROOT / STORE, judge="lexical-v1")  # the free judge: shp would look cheaper, not the paper's setting
    try:
        free = {r["policy"]: r for r in headline_rows(con)}
    finally:
        con.close()
    assert free["shp"]["saving"] > by["shp"]["saving"] and free["oracle_is"]["saving"] == 0


def test_the_lenient_answers_of_every_shipped_draft_are_the_python_reading() -> None:
    con = connect(ROOT / STORE, judge=JUDGE)
    try:
        got = con.execute(
            "SELECT r.draft, s.ground_truth, a.answer, a.has_inline_answer, a.answer_em, a.answer_f1 "
            "FROM answers_lenient a JOIN rounds r USING (gen_id, scenario_id, round) "
            "JOIN scenarios s USING (scenario_id)"
        ).fetchall()
        test = connect(ReplayScope(ROOT / STORE, judge=JUDGE, scenario_ids=_test_ids(con)))
        try:
            dyn = answer_dynamics(test)
        finally:
            test.close()
    finally:
        con.close()
    assert len(got) == 480
    for draft, gold, answer, inline, em, f1 in got:
        assert (answer, inline) == lenient_answer(draft)
        assert (inline, em, f1) == lenient_answer_scores(draft, gold)
    # Revising is not changing the answer: most drafts change after round 1, far fewer answers do.
    assert dyn["trajectories"] == 60
    assert dyn["share_answer_changed"] < 0.6 < 0.9 < dyn["share_draft_changed"]


def _test_ids(con) -> list[str]:  # noqa: ANN001
    return [r[0] for r in con.execute("SELECT scenario_id FROM scenarios WHERE split = 'test'").fetchall()]
