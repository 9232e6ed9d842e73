"""The sweep's one summary from the rows its jobs left (sweeps.summary): order, the best mark, the 95% CI,
the report link and the heatmap file -- on rows written as the jobs write them, drawn by real matplotlib.
(The end-to-end multiruns that produce them: tests/test_sweep.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from scipy.stats import t

from sweeps.summary import BEST, ci95, load_jobs, rows, summarise, swept, write_job


def _row(policy: str, saving: float, delta: float, lower: float, ok: bool, n: int = 30) -> dict:
    return {"policy": policy, "n": n, "n_is": n, "token_saving": saving, "delta_is": delta,
            "delta_is_lower95": lower, "non_inferior": ok, "tost_power": 0.9, "n_needed": 20,
            "degenerate": False, "underpowered": False, "delta_f1": 0.0, "delta_em": 0.0}  # fmt: skip


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
