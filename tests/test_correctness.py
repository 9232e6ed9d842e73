"""Stopping judged on correctness (analysis.stats.correctness, the correctness views, sweeps.code_results) over an
imported store of code-loop trajectories whose hidden and visible test results per round are given.

Every expected number is computed here, in Python, from the FILE's rows: the stop rounds by the reference
executor (shp_ray.policy.reference), the pass rates, McNemar counts and p-values (scipy.stats.binomtest), the
oracle's earliest passing round, the break and fix counts.
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
from scipy import stats as st

import analysis
from analysis import sql
from analysis.sql.rows import fetch_dicts
from analysis.stats import correctness
from analysis.stats.correctness import code_policies
from shp_ray.generation.answer_config import AnswerSpec
from shp_ray.generation.answer_config import build as build_extractor
from shp_ray.importer.cli import main as shp_import
from shp_ray.policy.reference import family_replay, replay
from shp_ray.policy.scorers import Task
from shp_ray.policy.scoring import cosine_distance
from shp_ray.policy.table import policy_by_name
from shp_ray.policy.trajectory import Round, Trajectory
from storage.parts import Store
from sweeps import app
from sweeps.code_results import render
from sweeps.job import JobResult

DEPTH = 4
# hidden / visible test results per round of each trajectory (dev first): passes that appear, break and come back
HIDDEN = [
    "0011",
    "1111",
    "0000",
    "1011",  # dev
    "0111",
    "1100",
    "0001",
    "0000",
    "1111",
    "0101",
    "0010",
    "1000",
    "0110",
    "0011",  # test
]
VISIBLE = [
    "0111",
    "1111",
    "0010",
    "1111",
    "1111",
    "1100",
    "0011",
    "0001",
    "1111",
    "0111",
    "0110",
    "1000",
    "0111",
    "1011",
]
APPROVED = {(1, 1), (4, 2), (8, 1), (12, 2)}  # (trajectory, round) whose critique approves


def _rows(visible: bool = True, dim: int = 8) -> list[dict]:
    rng = np.random.default_rng(3)
    out = []
    for i, (hid, vis) in enumerate(zip(HIDDEN, VISIBLE, strict=True)):
        base = rng.normal(size=dim)
        rounds = []
        for t in range(1, DEPTH + 1):
            scores = {"hidden_pass": float(hid[t - 1])}
            if visible:
                scores["visible_pass"] = 1.0 if vis[t - 1] == "1" else 0.5
            rounds.append({
                "draft": f"def f():\n    return {i * 10 + t}\n",
                "feedback": "" if t == DEPTH else ("APPROVED" if (i, t) in APPROVED else f"Fix case {t}."),
                "tokens": {"writer_prompt": 100, "writer_completion": 20 + t, "critic_prompt": 0 if t == DEPTH else 90,
                           "critic_completion": 0 if t == DEPTH else 10},
                "scores": scores,
                "embedding": [round(float(x), 6) for x in base + rng.normal(size=dim) * 0.5 / t],
            })  # fmt: skip
        out.append(
            {"id": f"he-{i:02d}", "question": f"task {i}", "split": "dev" if i < 4 else "test", "rounds": rounds}
        )
    return out


def _store(folder, rows) -> str:
    path = folder / "traces.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = folder / "store"
    assert shp_import([str(path), "--store", str(store)]) == 0
    return str(store)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    return _store(tmp_path_factory.mktemp("code"), _rows())


@pytest.fixture(scope="module")
def con(store):
    c = analysis.connect(store, policies=code_policies(DEPTH))
    yield c
    c.close()


def _trajectory(row: dict, verdicts: bool) -> Trajectory:
    built, prev = [], None
    for t, r in enumerate(row["rounds"], start=1):
        emb = np.asarray(r["embedding"], dtype=np.float32)
        tok = r["tokens"]
        built.append(Round(round=t, distance=math.nan if prev is None else cosine_distance(emb, prev),
                           feedback=r["feedback"],
                           writer_tokens=tok["writer_prompt"] + tok["writer_completion"],
                           critic_tokens=tok["critic_prompt"] + tok["critic_completion"], draft=r["draft"],
                           embedding=emb))  # fmt: skip
        prev = emb
    meta = {"verdicts": [r["scores"]["visible_pass"] == 1.0 for r in row["rounds"]]} if verdicts else {}
    # each draft's answer as the import stored it (the task's own reader: these tasks name no entry point, so QA's)
    task, extractor = Task(row["id"], row["question"]), build_extractor(AnswerSpec())
    meta["answers"] = [extractor.extract(task, r["draft"])[1] for r in row["rounds"]]
    return Trajectory(row["id"], tuple(built), meta=meta)


def _returned(name: str, row: dict, verdicts: bool = True) -> int:
    """The round whose draft the policy returns, by the reference executor over the file's trajectory."""
    if name.startswith("oracle_") and name != "oracle_is":  # oracle_<score>: the first round of the highest score
        values = [r["scores"][name.removeprefix("oracle_")] for r in row["rounds"]]
        return values.index(max(values)) + 1
    policy, traj = policy_by_name(name, code_policies(DEPTH)[0].halt), _trajectory(row, verdicts)
    if policy.family:
        return family_replay(policy, traj, min(policy.halt.max_rounds, DEPTH))[2]
    return replay(policy, traj).stop_round


def _mcnemar(x: list[int], y: list[int]) -> tuple[int, int, float]:
    gained = sum(a and not b for a, b in zip(x, y, strict=True))
    lost = sum(b and not a for a, b in zip(x, y, strict=True))
    return gained, lost, (st.binomtest(gained, gained + lost, 0.5).pvalue if gained + lost else 1.0)


def test_pass_at_stop_and_its_mcnemar_tests_equal_a_python_computation_per_split(con) -> None:
    rows = correctness.compare_pass(con)
    rows_file = _rows()
    assert {r["split"] for r in rows} == {"dev", "test"}
    policies = {r["policy"] for r in rows}
    assert {"shp", "fixed_k1", f"fixed_k{DEPTH}", "verifier", "best_verified", "oracle_hidden_pass"} <= policies
    checked = 0
    for r in rows:
        mine = [f for f in rows_file if f["split"] == r["split"]]
        hidden = [[int(c) for c in HIDDEN[int(f["id"][3:])]] for f in mine]
        got = [h[_returned(r["policy"], f) - 1] for h, f in zip(hidden, mine, strict=True)]
        first, last = [h[0] for h in hidden], [h[-1] for h in hidden]
        assert r["n"] == len(mine) and r["pass_at_stop"] == pytest.approx(np.mean(got)), r["policy"]
        assert r["baseline_pass"] == pytest.approx(np.mean(last)) and r["first_pass"] == pytest.approx(np.mean(first))
        assert r["oracle_pass"] == pytest.approx(np.mean([max(h) for h in hidden]))
        gained, lost, p = _mcnemar(got, last)
        assert (
            (r["gained"], r["lost"]) == (gained, lost)
            and r["p"] == pytest.approx(p)
            and r["p_mcnemar"] == pytest.approx(p)
        )
        gained1, lost1, p1 = _mcnemar(got, first)
        assert (r["gained_k1"], r["lost_k1"], r["p_k1"]) == (gained1, lost1, pytest.approx(p1))
        assert r["diff"] == pytest.approx((gained - lost) / len(mine)) and r["ci95_low"] <= r["diff"] <= r["ci95_high"]
        assert r["gap"] == pytest.approx(np.mean([max(h) for h in hidden]) - np.mean(got))
        checked += 1
    assert checked == len(rows) and checked >= 2 * 20


def test_the_sweep_console_shows_pass_at_stop_where_a_qa_run_shows_f1(con, capsys) -> None:
    summary = con.sql(sql.query("sweep_summary")).to_arrow_table().to_pylist()
    app._print_table(JobResult(run_id="r", gen_id="g", judge="lexical", store="s", scenarios=40, trajectories=40,
                               summary=summary, primary="hidden_pass"))  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    head = out[2].split()
    assert head[7:9] == ["hidden_pass", "dhidden_pass"] and "F1" not in head  # the primary outcome leads
    assert any("on hidden_pass, the primary outcome" in line for line in out)
    expected = {(r["split"], r["policy"]): r for r in correctness.compare_pass(con) if r["score"] == "hidden_pass"}
    for split in ("dev", "test"):
        table = out[out.index(next(x for x in out if x.startswith(f"split {split},"))) :]
        shp = next(line for line in table if line.startswith("shp ")).split()
        row = expected[(split, "shp")]  # every value known here: the mean at the stop is pass_at_stop
        assert shp[7:9] == [f"{row['pass_at_stop']:.3f}", f"{row['delta_pass']:+.3f}"]


def test_the_oracle_is_the_earliest_passing_round_and_breaks_and_fixes_are_counted(con) -> None:
    oracle = {r["scenario_id"]: r for r in fetch_dicts(con, "SELECT * FROM oracle_pass WHERE score = 'hidden_pass'")}
    for i, h in enumerate(HIDDEN):
        assert oracle[f"he-{i:02d}"]["oracle_round"] == (h.index("1") + 1 if "1" in h else None)
    breaks = {r["split"]: r for r in correctness.break_rates(con, "hidden_pass")}
    for split, ids in (("dev", range(4)), ("test", range(4, len(HIDDEN)))):
        pairs = [(HIDDEN[i][t], HIDDEN[i][t + 1]) for i in ids for t in range(DEPTH - 1)]
        b = breaks[split]
        assert (b["from_passing"], b["broke"]) == (sum(a == "1" for a, _ in pairs), pairs.count(("1", "0")))
        assert (b["from_failing"], b["fixed"]) == (sum(a == "0" for a, _ in pairs), pairs.count(("0", "1")))
        assert b["break_rate"] == pytest.approx(pairs.count(("1", "0")) / sum(a == "1" for a, _ in pairs))
    by_round = [r for r in correctness.by_round(con, "hidden_pass") if r["split"] == "test"]
    assert [r["pass_rate"] for r in by_round] == pytest.approx(
        [np.mean([int(HIDDEN[i][t]) for i in range(4, len(HIDDEN))]) for t in range(DEPTH)]
    )


def test_the_verifier_stops_at_the_first_round_whose_visible_tests_all_pass(con) -> None:
    got = dict(con.execute("SELECT scenario_id, stop_round FROM replay WHERE policy = 'verifier'").fetchall())
    reasons = dict(con.execute("SELECT scenario_id, reason FROM replay WHERE policy = 'verifier'").fetchall())
    for i, v in enumerate(VISIBLE):
        first = v.index("1") + 1 if "1" in v else DEPTH
        assert got[f"he-{i:02d}"] == first and reasons[f"he-{i:02d}"] == ("verified" if "1" in v else "cap")
    best = dict(con.execute("SELECT scenario_id, selected_round FROM family_replay WHERE policy = 'best_verified'")
                .fetchall())  # fmt: skip
    for i, v in enumerate(VISIBLE):
        assert best[f"he-{i:02d}"] == (v.rindex("1") + 1 if "1" in v else DEPTH)


def test_without_visible_tests_the_verifier_keeps_its_own_check(tmp_path) -> None:
    rows = _rows(visible=False)
    c = analysis.connect(_store(tmp_path, rows), policies=code_policies(DEPTH))
    try:
        got = dict(c.execute("SELECT scenario_id, stop_round FROM replay WHERE policy = 'verifier'").fetchall())
        assert correctness.pass_fail_scores(c) == ["hidden_pass"]
    finally:
        c.close()
    assert got == {r["id"]: _returned("verifier", r, verdicts=False) for r in rows}


def test_the_sql_mcnemar_p_is_scipys_exact_binomial_test() -> None:
    import duckdb

    pairs = [(b, c) for b in range(0, 13) for c in range(0, 13)] + [(40, 71), (100, 64)]
    values = ", ".join(f"({b}, {c})" for b, c in pairs)
    expr = sql.query("mcnemar_p", b="b", c="c")
    got = duckdb.sql(f"SELECT b, c, {expr} FROM (VALUES {values}) v(b, c)").fetchall()
    for b, c, p in got:
        assert p == pytest.approx(correctness.mcnemar_p(b, c), rel=1e-9, abs=1e-15), (b, c)
    assert correctness.mcnemar_p(5, 0) == pytest.approx(2 * 0.5**5)  # by hand: 2 * P(X = 0 | n = 5)
    assert correctness.mcnemar_p(3, 3) == 1.0 and correctness.mcnemar_p(0, 0) == 1.0


def test_the_paired_difference_interval() -> None:
    # Newcombe's method 10 on the table (36, 12, 2, 0), worked by hand from its formula
    lo, hi = correctness.paired_difference_ci(36, 12, 2, 0)
    assert (round(lo, 4), round(hi, 4)) == (0.0569, 0.3404)
    assert correctness.paired_difference_ci(36, 2, 12, 0) == pytest.approx((-hi, -lo))  # swapped: negated
    assert correctness.paired_difference_ci(10, 0, 0, 0) == pytest.approx((-0.2775, 0.2775), abs=1e-4)
    assert all(math.isnan(x) for x in correctness.paired_difference_ci(0, 0, 0, 0))


def test_a_score_that_is_not_pass_fail_is_refused_naming_the_ones_there_are(con) -> None:
    with pytest.raises(analysis.AnalysisError, match=r"'visible_pass' is not a pass/fail score.*hidden_pass"):
        correctness.compare_pass(con, "visible_pass")


def test_the_code_section_renders_the_same_numbers(store) -> None:
    text = render(Store(store))
    assert text == render(Store(store))  # the same store, the same bytes
    assert "imported trajectories (from `traces.jsonl`" in text and "### dev split (N = 4)" in text
    assert "### test split (N = 10)" in text and "| oracle_hidden_pass |" in text
    # test split: round 1 passes 3 of 10, the oracle 9 of 10
    assert "| 1 | 10 | 3 | 30.0% |" in text and "passes 90.0%, against 30.0% at round 1" in text


def test_the_report_shows_pass_at_stop_beside_is_per_split(store, tmp_path) -> None:
    from analysis.report import write_report

    md = write_report(store, tmp_path / "report", n_resamples=50).read_text()
    assert "## Correctness: pass at stop on the hidden tests · split dev" in md
    assert "## Correctness: pass at stop on the hidden tests · split test" in md
    assert "| 1 | 10 | 3 | 30.0% |" in md  # the test split's round 1, as in the rendered section
    page = (tmp_path / "report" / "index.html").read_text()
    payload = json.loads(page.split('id="report-data">', 1)[1].split("</script>", 1)[0])
    heads = [c[1] for c in payload["columns"]]
    at = heads.index("hidden_pass_at_stop")
    assert all(len(row) == len(heads) for row in payload["rows"])
    k1_cells = [row[at] for row in payload["rows"] if row[2][1] == "fixed_k1"]  # one per split: dev, test
    assert sorted(c[0] for c in k1_cells) == pytest.approx([0.3, 0.5])
    rows = list(csv.DictReader((tmp_path / "report" / "correctness.csv").open()))
    k1 = next(r for r in rows if r["policy"] == "fixed_k1" and r["split"] == "test")
    assert float(k1["pass_at_stop"]) == pytest.approx(0.3)


def test_the_loops_own_verdict_is_the_same_in_the_live_pushes_and_the_columns() -> None:
    from shp_ray.policy.families.columns import SignalColumns
    from shp_ray.policy.families.signals import SignalState

    rng = np.random.default_rng(0)
    drafts = ["def f(): return 1", "def f(): return 2", "def f(): return 3", "x", "y"]
    emb = rng.normal(size=(5, 4)).astype(np.float32)
    checks = np.array([0.0, 1.0, np.nan, 1.0, 0.0])  # trajectory 2 (rows 3-4) verdicts; row 2: the verifier's
    cols = SignalColumns([3, 2], drafts, emb, np.zeros_like(emb), np.zeros(5, bool), np.ones(5), [(), ()], checks)
    got = [s.verified for b in range(2) for s in cols.history(b)]
    pushed = []
    for rows in ((0, 1, 2), (3, 4)):
        state = SignalState(())
        for r in rows:
            pushed.append(
                state.push(drafts[r], emb[r], None, 1, None if np.isnan(checks[r]) else checks[r] == 1.0).verified
            )
    assert got == pushed == [False, True, False, True, False]  # the QA check accepts no draft without contexts


def test_the_renderer_runs_from_the_command_line_and_refuses_a_path_without_a_store(store, tmp_path, capsys) -> None:
    from sweeps.code_results import main

    out = tmp_path / "code.md"
    assert main([store, "--out", str(out)]) == 0
    assert out.read_text() == render(Store(store))
    assert main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nowhere" in err[0] and "Traceback" not in err[0]
    assert main([store, "--score", "visible_pass"]) == 2
    assert "not a pass/fail score" in capsys.readouterr().err


def test_a_trace_whose_split_is_not_a_string_is_one_line_naming_file_and_line(tmp_path, capsys) -> None:
    rows = _rows()[:2]
    rows[1]["split"] = 3
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert shp_import([str(path), "--store", str(tmp_path / "store")]) == 2
    assert f"{path}:2: split must be a non-empty string" in capsys.readouterr().err
    assert not (tmp_path / "store" / "rounds").exists()


def test_the_benchmark_prints_one_json_line(tmp_path, capsys) -> None:
    from bench.correctness import main

    assert main(["--trajectories", "12", "--rounds", "3", "--keep", str(tmp_path)]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["bench"] == "correctness" and line["summary_rows"] == 2 * (line["policies"] + 2)  # + 2 oracles


@pytest.mark.parametrize("n", [1, 7, 47, 160])
def test_the_wilson_interval_of_none_or_all_stays_within_zero_and_one(n: int) -> None:
    """A rate of 0 of n or n of n has the bound 0 or 1 exactly: a report must never print "-0.0%"."""
    lo, hi = correctness.wilson(0, n)
    assert lo == 0.0 and 0.0 < hi < 1.0
    lo, hi = correctness.wilson(n, n)
    assert hi == 1.0 and 0.0 < lo < 1.0
    lo, hi = correctness.wilson(1, n + 1)
    assert 0.0 < lo < 1 / (n + 1) < hi < 1.0
