"""The HTML report in a real browser: headless Chromium (the OS package) opens ``report/index.html`` of the shipped
store (results/paper-local/store: real drafts of a real local model, dev and test splits) from disk, driven over
the DevTools protocol. No console error, no request but the file itself, the policy table has the rows of
policy_summary (per split), sorts, and choosing a trajectory shows every round and each policy's stop marker.
Where no Chromium can be installed, the test says so and skips."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

import analysis
from analysis.report import write_report
from analysis.report.html_report import INDEX
from analysis.sql.rows import fetch_dicts
from shp_ray.bench.browser import Chromium, find_chromium

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
JUDGE = "llm:qwen2.5-coder-1.5b-instruct"
READY = (
    "new Promise(r => window.shpReport && window.shpReport.ready ? r(true)"
    " : document.addEventListener('report-ready', () => r(true), {once: true}))"
)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, Path]:
    """(store copy, report folder): the store is copied, as opening it keeps derived inputs in its _cache."""
    base = tmp_path_factory.mktemp("browser")
    store = base / "store"
    shutil.copytree(ROOT / "results/paper-local/store", store)
    write_report(analysis.ReplayScope(store, judge=JUDGE), base / "report", n_resamples=200)
    return store, base / "report"


def test_the_page_is_self_contained(report) -> None:
    html = (report[1] / INDEX).read_text()
    assert "<script src" not in html and "<link" not in html  # every asset inlined
    assert html.count('<script type="application/gzip+base64" id="tp-') == 1  # 80 trajectories: one block of 100


def _run(coro):  # noqa: ANN001, ANN202
    return asyncio.run(coro)


def test_report_opens_in_headless_chromium(report, tmp_path) -> None:
    if find_chromium() is None:
        pytest.skip("no Chromium on PATH and none could be installed (make's set-up: apt-get install chromium)")
    store, folder = report
    con = analysis.connect(store, judge=JUDGE)
    try:
        expected = {(r["split"], r["policy"]) for r in fetch_dicts(con, "SELECT split, policy FROM policy_summary")}
        stops = {r["policy"]: r["stop_round"] for r in fetch_dicts(
            con, "SELECT policy, stop_round FROM replay WHERE scenario_id = (SELECT min(scenario_id) FROM replay "
            "WHERE scenario_id IN (SELECT scenario_id FROM scenario_splits WHERE split = 'test'))")}  # fmt: skip
    finally:
        con.close()
    assert {s for s, _ in expected} == {"dev", "test"}  # the store holds both: the table shows each apart

    async def drive() -> dict:
        async with Chromium.start(tmp_path / "profile") as page:
            await page.open(folder / INDEX)
            await page.evaluate(READY)
            seen = {"requests": list(page.requests)}
            seen["rows"] = await page.evaluate(
                "[...document.querySelectorAll('#policy-table tbody tr')]"
                ".map(tr => [...tr.cells].map(c => c.textContent))"
            )
            await page.evaluate("document.querySelector('#policy-table th[data-key=\"policy\"]').click()")
            seen["sorted"] = await page.evaluate(
                "[...document.querySelectorAll('#policy-table tbody tr')].map(tr => tr.cells[2].textContent)"
            )
            seen["charts"] = await page.evaluate("document.querySelectorAll('#figures .js-plotly-plot').length")
            # choose the first test-split scenario in the list (the index is ordered by split, then scenario)
            seen["shown"] = await page.evaluate(
                "new Promise(r => { document.addEventListener('trajectory-shown', e => r(e.detail), {once: true});"
                " [...document.querySelectorAll('#traj-list li')].find(li => li.textContent.includes(' · test · '))"
                ".click(); })"
            )
            seen["cards"] = await page.evaluate(
                "[...document.querySelectorAll('.round-card')].map(c => [c.dataset.round,"
                " c.querySelector('.draft').textContent.length, c.querySelectorAll('ins, del').length,"
                " c.querySelector('.scores').textContent])"
            )
            seen["markers"] = await page.evaluate(
                "Object.fromEntries([...document.querySelectorAll('table.stops tr[data-policy]')].map(tr =>"
                " [tr.dataset.policy, Number(tr.querySelector('td.stop-marker').dataset.round)]))"
            )
            seen["title"] = await page.evaluate("document.querySelector('#trajectory h3').textContent")
            seen["png"] = await page.screenshot(tmp_path / "report.png")
            seen["errors"] = list(page.errors)
            return seen

    seen = _run(drive())
    assert seen["errors"] == []
    assert seen["requests"] and all(u.startswith("file://") for u in seen["requests"]), seen["requests"]
    assert {(r[0], r[2]) for r in seen["rows"]} == expected and len(seen["rows"]) == len(expected)
    assert seen["sorted"] == sorted(seen["sorted"])
    assert seen["charts"] == 4  # Pareto and tokens saved, for dev and for test
    assert seen["shown"]["rounds"] == 6 and "split test" in seen["title"]
    assert [c[0] for c in seen["cards"]] == ["1", "2", "3", "4", "5", "6"]
    assert all(c[1] > 0 for c in seen["cards"]) and all("d_t" in c[3] and "F1" in c[3] for c in seen["cards"])
    assert sum(c[2] for c in seen["cards"][1:]) > 0  # later drafts shown as diffs to the previous one
    assert seen["markers"] == stops  # each policy's marker at the round the replay stops it
    assert seen["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
