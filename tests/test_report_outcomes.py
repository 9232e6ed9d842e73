"""Every score of the store is an outcome of the report (analysis.stats.outcomes): an imported store whose loop
measured a pass/fail ``correct`` and a graded ``quality`` of each round, with no judge and no gold answers, is
reported on those, with their paired tests, and without an IS or EM / F1 column, chart or oracle_is row. The values
are checked against the imported file itself."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

import analysis
from analysis.errors import AnalysisError
from analysis.report import data as report_data
from analysis.report import html_report, write_report
from analysis.stats import outcomes
from shp_ray.importer.cli import main

N, DEPTH = 24, 3


def _rows(seed: int = 3) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(N):
        base = rng.normal(size=8)
        rounds = []
        for t in range(1, DEPTH + 1):
            right = bool(rng.random() < 0.3 + 0.2 * t)
            rounds.append({
                "draft": f"def f{i}(x):\n    return x + {t}\n",
                "feedback": "" if t == DEPTH else f"Revise round {t}.",
                "tokens": {"writer_prompt": 100, "writer_completion": 20 * t,
                           "critic_prompt": 0 if t == DEPTH else 80, "critic_completion": 0 if t == DEPTH else 10},
                "scores": {"correct": float(right), "quality": round(float(rng.random()), 4)},
                "embedding": [round(float(x), 6) for x in base + rng.normal(size=8) / t],
            })  # fmt: skip
        out.append({"id": f"task-{i:02d}", "question": f"def f{i}(x):\n    '''add'''", "rounds": rounds})
    return out


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("outcomes")
    rows = _rows()
    path = folder / "traces.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = folder / "store"
    assert main([str(path), "--store", str(store)]) == 0
    out = folder / "report"
    write_report(store, out, n_resamples=100)
    return rows, store, out


def test_the_imported_scores_lead_the_report_and_the_missing_outcomes_are_left_out(imported) -> None:
    rows, _, out = imported
    md = (out / "report.md").read_text()
    assert "Primary outcome: **`correct`**" in md  # the only pass/fail score: the task's correctness
    head = next(line for line in md.splitlines() if line.startswith("| policy | rounds"))
    assert "correct_at_stop" in head and "quality_at_stop" in head and "Δcorrect [95% CI]" in head
    assert head.index("correct_at_stop") < head.index("quality_at_stop")  # the primary first
    assert "| IS |" not in head and "| EM |" not in head and "| F1 |" not in head
    assert "| oracle_is |" not in md  # no row: fixed_k1 under another name on a store without IS
    assert md.count("- IS: left out") == 1 and md.count("- EM / F1: left out") == 1
    assert "## Correctness: pass at stop of `correct`" in md
    # fixed_k1 returns round 1's draft: its correct_at_stop is the file's share of right first drafts
    first = np.mean([r["rounds"][0]["scores"]["correct"] for r in rows])
    k1 = next(line for line in md.splitlines() if line.startswith("| fixed_k1 |")).split(" | ")
    assert k1[head.split(" | ").index("correct_at_stop")] == f"{first:.3f}"
    for name in ("correctness", "outcomes", "policy_summary"):  # every CSV written holds rows
        assert (out / f"{name}.csv").stat().st_size > 0
    with (out / "outcomes.csv").open() as fh:
        said = list(csv.DictReader(fh))
    last = np.mean([r["rounds"][-1]["scores"]["quality"] for r in rows])
    k3 = next(r for r in said if r["policy"] == "fixed_k3" and r["score"] == "quality")
    assert float(k3["at_stop"]) == pytest.approx(last) and float(k3["diff"]) == 0.0


def test_the_html_report_shows_each_score_and_no_is(imported) -> None:
    _, store, _ = imported
    scope = analysis.ReplayScope(store)
    data = report_data.collect(scope, report_data.Options(scope.delta, (0.02,), 0.05, n_resamples=100))
    keys = [k for k, _, _ in html_report.columns(data)]
    assert {"correct_at_stop", "correct_diff", "correct_ci", "correct_p", "quality_at_stop"} <= set(keys)
    assert not {"mean_is", "verdict", "is_ci", "mean_em", "mean_f1"} & set(keys)
    assert "oracle_is" not in {r[2][1] for r in html_report.table_rows(data)}
    fig = html_report.html_figures.pareto(data.parts[0], "t", data.primary)
    assert fig["layout"]["yaxis"]["title"]["text"] == "correct at stop (share that passes)"
    _, pages, _, _ = html_report.trajectories(data.parts, data.scores)
    assert data.scores == ["correct", "quality"] and all(len(r[-1]) == 2 for t in pages[0] for r in t["rounds"])


def test_the_primary_outcome_is_chosen_or_refused_with_what_there_is() -> None:
    assert outcomes.primary(None, ["hidden_pass", "visible_pass"], ["hidden_pass"], False) == "hidden_pass"
    assert outcomes.primary(None, ["correct", "quality"], ["correct"], True) == "correct"
    assert outcomes.primary(None, ["a", "b"], ["a", "b"], True) == "is"  # two pass/fail scores: IS unless named
    assert outcomes.primary(None, [], [], True) == "is"
    assert outcomes.primary("quality", ["correct", "quality"], ["correct"], True) == "quality"
    with pytest.raises(AnalysisError, match=r"report.primary=is: .* it has: correct, quality$"):
        outcomes.primary("is", ["correct", "quality"], ["correct"], False)
    with pytest.raises(
        AnalysisError,
        match=r"report.primary=Corect: this run .* it has: is, correct, quality; did you mean `correct`\?$",
    ):
        outcomes.check_requested("Corect", ["quality", "correct"], True, "this run")  # the nearest, the case aside
    outcomes.check_requested("quality", ["quality"], False)  # there: no error
    with pytest.raises(AnalysisError, match=r"it has: is; answer EM / F1 are outcomes when the run scores them"):
        outcomes.check_requested("f1", [], True)  # the report's F1 column is no score of a judge-only QA run


def test_a_named_pass_fail_score_among_several_gets_its_correctness_section_and_csv(tmp_path) -> None:
    """Two pass/fail scores and no hidden_pass: no score is the task's correctness unless the user names one; named
    (report.primary=correct), it leads and has its correctness section and a correctness.csv of rows."""
    rows = _rows(seed=5)
    for r in rows:
        for t in r["rounds"]:
            t["scores"] = {"correct": t["scores"]["correct"], "strict": float(t["scores"]["quality"] > 0.5)}
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = tmp_path / "store"
    assert main([str(path), "--store", str(store)]) == 0
    write_report(store, tmp_path / "report", n_resamples=50, primary="correct")
    md = (tmp_path / "report" / "report.md").read_text()
    assert "Primary outcome: **`correct`**" in md and "## Correctness: pass at stop of `correct`" in md
    with (tmp_path / "report" / "correctness.csv").open() as fh:
        said = list(csv.DictReader(fh))
    assert said and {r["score"] for r in said} == {"correct"}
    # not named: the first of them leads (no IS to lead) and is the report's correctness too
    write_report(store, tmp_path / "default", n_resamples=50)
    md = (tmp_path / "default" / "report.md").read_text()
    assert "Primary outcome: **`correct`**" in md and "## Correctness: pass at stop of `correct`" in md
    assert (tmp_path / "default" / "correctness.csv").stat().st_size > 0


def test_a_score_whose_scorer_failed_on_every_draft_is_left_out_saying_why(tmp_path) -> None:
    """A scorer that raised on every draft leaves a score with no value: no column, chart or row of it in the
    report or the page, one line each naming the error; the file's own scores stay."""
    (tmp_path / "broken.py").write_text("def score(task, draft):\n    raise ValueError('no Answer: line')\n")
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(seed=7)[:8]))
    store = tmp_path / "store"
    assert main([str(path), "--store", str(store), "--score", f"python:{tmp_path / 'broken.py'}:score"]) == 0
    failed = analysis.connect(store).execute("SELECT DISTINCT score FROM scores WHERE value IS NULL").fetchall()
    [(name,)] = failed
    write_report(store, tmp_path / "report", n_resamples=50)
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"- `{name}`: left out (its scorer failed on every draft: ValueError: no Answer: line)." in md
    assert f"{name}_at_stop" not in md and "correct_at_stop" in md
    scope = analysis.ReplayScope(store)
    data = report_data.collect(scope, report_data.Options(scope.delta, (0.02,), 0.05, n_resamples=50))
    assert name not in data.scores and not any(k.startswith(f"{name}_") for k, _, _ in html_report.columns(data))
    assert any(line.startswith(f"{name}: its scorer failed on every draft") for line in html_report._left_out(data, []))
