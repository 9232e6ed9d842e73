"""The sweep's one summary from the rows its jobs left (sweeps.summary): order, the best mark, the 95% CI,
the report link and the heatmap file -- on rows written as the jobs write them, drawn by real matplotlib.
(The end-to-end multiruns that produce them: tests/test_sweep.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from scipy.stats import t

from sweeps.summary import BEST, cells, ci95, head, load_jobs, rows, swept, write_job
from sweeps.summary_page import PAGE, summarise
from tests.page_support import page_table


def _row(policy: str, saving: float, delta: float, lower: float, ok: bool, n: int = 30) -> dict:
    return {"policy": policy, "n": n, "n_is": n, "token_saving": saving, "delta_is": delta,
            "delta_is_lower95": lower, "non_inferior": ok, "tost_power": 0.9, "n_needed": 20,
            "degenerate": False, "underpowered": False, "mean_f1": 0.4, "share_answer_line": 0.9, "delta_f1": 0.0,
            "delta_em": 0.0}  # fmt: skip


def _sweep(tmp_path: Path) -> Path:
    """A 2 x 2 eps x k grid: shp saves more where eps is larger, and is non-inferior only at k=2."""
    for num, (eps, k) in enumerate([(e, k) for e in ("0.02", "0.06") for k in ("1", "2")]):
        saving = 0.1 if eps == "0.02" else 0.3
        ok = k == "2"
        summary = [_row("shp", saving, -0.01, -0.015 if ok else -0.05, ok), _row("fixed_k3", 0.0, 0.0, 0.0, True)]
        report = tmp_path / "multi" / str(num) / "report" / "report.md"
        html = report.with_name("index.html")
        if num == 3:  # the browsable report was written: the link goes there (else to report.md)
            html.parent.mkdir(parents=True)
            html.write_text("<html></html>")
        write_job(tmp_path / "multi" / str(num), [f"halting.eps={eps}", f"halting.k={k}", "provider=sim"],
                  {"summary": summary, "report": str(report), "html": str(html)})  # fmt: skip
    return tmp_path / "multi"


def test_the_rows_are_sorted_and_the_best_non_inferior_policy_is_marked(tmp_path):
    jobs = load_jobs(_sweep(tmp_path))
    assert swept(jobs) == {"halting.eps": ["0.02", "0.06"], "halting.k": ["1", "2"]}
    out = rows(jobs)
    assert [(r["job"], r["policy"]) for r in out][:2] == [
        ("halting.eps=0.06 halting.k=2", "shp"),  # non-inferior and saves the most
        ("halting.eps=0.02 halting.k=2", "shp"),
    ]
    assert [r["best"] for r in out].count(True) == 1 and out[0]["best"]
    assert all(not r["non_inferior"] for r in out[-2:])  # the not non-inferior rows last


def test_the_ci_is_the_two_sided_95_percent_interval():
    row = _row("shp", 0.2, -0.01, -0.01 - t.ppf(0.95, 29) * 0.004, True)  # a standard error of 0.004
    lo, hi = ci95(row)
    half = t.ppf(0.975, 29) * 0.004
    assert (lo, hi) == (pytest.approx(-0.01 - half), pytest.approx(-0.01 + half))
    assert ci95({**row, "n_is": 1}) == (None, None)  # no interval from one difference


def test_summarise_writes_the_table_markdown_and_heatmap(tmp_path):
    multi = _sweep(tmp_path)
    text = summarise(multi)
    assert text is not None and text.count("\n") == 2 + 8 - 1  # header, rule, a row per job x policy
    assert BEST in text.splitlines()[2]
    md = (multi / "summary.md").read_text()
    assert "`halting.eps` = 0.02, 0.06, `halting.k` = 1, 2" in md and "![summary](summary.png)" in md
    assert str(multi / "3" / "report" / "index.html") in md  # the job whose report/index.html exists
    assert str(multi / "0" / "report" / "report.md") in md
    assert (multi / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summarise(tmp_path / "empty") is None  # no job left rows (a dry run): nothing written
    assert not (tmp_path / "empty" / "summary.md").exists()


def test_the_sweep_page_holds_the_combined_table_a_heatmap_per_split_and_outcome_and_the_links(tmp_path):
    multi = _sweep(tmp_path)
    summarise(multi)
    text = (multi / PAGE).read_text()
    combined = rows(load_jobs(multi))
    assert page_table(text) == [list(head(combined)[:-1]), *(cells(r, combined) for r in combined)]
    assert {"dF1", "dEM"} <= set(head(combined))  # drafts that state answers: answer F1 and EM stay
    assert text.count('<table class="heatmap" data-outcome="is">') == 1  # one split, one outcome: IS
    assert 'href="3/report/index.html"' in text and 'href="0/report/report.md"' in text  # relative to the page
    assert "shp\n30%, dIS -0.010" in text  # the best cell (eps 0.06, k 2): shp, its saving and its dIS
    assert f"[{PAGE}]({PAGE})" in (multi / "summary.md").read_text()


def test_a_scores_primary_outcome_leads_the_summary_per_split(tmp_path):
    """A code sweep (hidden_pass the primary outcome, no IS) over dev and test: the verdict and the order are
    hidden_pass's, a row per split, no dIS column."""
    for num, k in enumerate(("1", "2")):
        summary = []
        for split in ("dev", "test"):
            cases = (("shp", 0.4, -0.1 if k == "1" else 0.0, k == "2"), ("fixed_k1", 0.7, -0.2, False))
            for policy, saving, delta, ok in cases:
                summary.append({"split": split, "policy": policy, "n": 20, "n_is": 0, "token_saving": saving,
                                "delta_is": None, "delta_is_lower95": None, "non_inferior": None,
                                "mean_f1": 0.0, "delta_f1": 0.0, "delta_em": 0.0, "share_answer_line": 0.0,
                                "scores": {"hidden_pass": {"mean": 0.5 + delta, "delta": delta,
                                                           "delta_lower95": delta - 0.05, "n_paired": 20,
                                                           "non_inferior": ok, "tost_power": 0.5, "n_needed": 40,
                                                           "degenerate": False, "underpowered": True}}})  # fmt: skip
        write_job(tmp_path / "m" / str(num), [f"halting.k={k}", "halting.eps=0.02"],
                  {"summary": summary, "primary": "hidden_pass", "pass_fail": ["hidden_pass"]})  # fmt: skip
    text = summarise(tmp_path / "m")
    first = text.splitlines()
    assert first[0].split()[:5] == ["job", "policy", "saved", "hidden_pass", "dhidden_pass"]
    assert "dIS" not in first[0] and "non-inferior (hidden_pass)" in first[0]
    assert "dF1" not in first[0] and "dEM" not in first[0]  # code: F1 0 by rule (no Answer: line), as the report
    assert first[2].split()[:2] == ["halting.k=2", "shp"] and BEST in first[2]  # non-inferior on hidden_pass
    assert sum(" (dev)" in line for line in first[2:]) == sum(" (test)" in line for line in first[2:]) == 4
    page = (tmp_path / "m" / PAGE).read_text()
    assert '<section data-split="dev">' in page and '<section data-split="test">' in page
    assert "No heatmap: it needs a sweep over two parameters; this one swept 1." in page


def test_every_point_of_the_summary_figure_is_labelled_once_and_a_shared_point_has_one_label(tmp_path, monkeypatch):
    """summary.png: a panel per job; each policy named on its panel exactly once, and policies that stop alike
    (the baseline and a cell that never stops early) share one label instead of printing on top of each other."""
    import matplotlib.pyplot as plt

    from sweeps.summary import figure

    for num, eps in enumerate(("0.02", "0.06")):
        summary = [_row("shp", 0.3, -0.01, -0.015, True), _row("fixed_k3", 0.0, 0.0, 0.0, True),
                   _row("abl_no_gain", 0.0, 0.0, 0.0, True)]  # fmt: skip
        write_job(tmp_path / "m" / str(num), [f"halting.eps={eps}"], {"summary": summary})
    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)  # keep the figure to read its labels back
    figure(rows(load_jobs(tmp_path / "m")), tmp_path / "summary.png")
    [fig] = drawn
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 2
    for ax in panels:
        labels = sorted(t.get_text() for t in ax.texts)
        assert labels == ["abl_no_gain, fixed_k3", "shp"], labels
    plt.close(fig)


def test_a_score_with_no_value_is_no_outcome_of_the_summary():
    from sweeps.summary import outcomes

    row = {
        **_row("shp", 0.3, -0.01, -0.015, True),
        "scores": {"python": {"mean": None, "n_paired": 0}, "right": {"mean": 0.5, "delta": 0.0, "n_paired": 30}},
    }
    assert set(outcomes(row)) == {"is", "right"}
