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
from bench.browser import Chromium, find_chromium
from shp_ray.policy import groups

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
    # grouped by family (shp_ray.policy.groups), each row saying its family and what it needs
    assert all((r[3], r[4]) == (groups.group(r[2]).family, groups.group(r[2]).needs) for r in seen["rows"])
    places = [(r[0], r[1], groups.group(r[2]).order) for r in seen["rows"]]
    assert places == sorted(places) and len({r[3] for r in seen["rows"]}) > 2
    assert seen["sorted"] == sorted(seen["sorted"])
    assert seen["charts"] == 4  # Pareto and tokens saved, for dev and for test
    assert seen["shown"]["rounds"] == 6 and "split test" in seen["title"]
    assert [c[0] for c in seen["cards"]] == ["1", "2", "3", "4", "5", "6"]
    assert all(c[1] > 0 for c in seen["cards"]) and all("d_t" in c[3] and "F1" in c[3] for c in seen["cards"])
    assert sum(c[2] for c in seen["cards"][1:]) > 0  # later drafts shown as diffs to the previous one
    assert seen["markers"] == stops  # each policy's marker at the round the replay stops it
    assert seen["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_qa_report_leads_with_is_and_its_intervals(report) -> None:
    html = (report[1] / INDEX).read_text()
    md = (report[1] / "report.md").read_text()
    assert '"primary":"is"' in html and '"IS 95% CI"' in html and '"non-inferior (IS)"' in html
    assert "Primary outcome: **IS (the judge's)**" in md and "left out" not in md


@pytest.fixture(scope="module")
def code_report(tmp_path_factory) -> tuple[Path, Path]:
    """(store copy, report folder) of the HumanEval store: the code loop's hidden_pass per round, no IS."""
    base = tmp_path_factory.mktemp("code-browser")
    store = base / "store"
    shutil.copytree(ROOT / "results/humaneval-local/store", store)
    write_report(analysis.ReplayScope(store), base / "report", n_resamples=200)
    return store, base / "report"


def test_the_code_report_shows_hidden_pass_per_policy_and_round_in_headless_chromium(code_report, tmp_path) -> None:
    if find_chromium() is None:
        pytest.skip("no Chromium on PATH and none could be installed (make's set-up: apt-get install chromium)")
    store, folder = code_report
    con = analysis.connect(store)
    try:
        sid = con.execute("SELECT min(scenario_id) FROM scenario_splits WHERE split = 'test'").fetchone()[0]
        passed = [bool(v) for (v,) in con.execute(
            "SELECT value FROM scores WHERE score = 'hidden_pass' AND scenario_id = ? ORDER BY round", [sid]
        ).fetchall()]  # fmt: skip
        at_stop = {(r["split"], r["policy"]): r["pass_at_stop"] for r in fetch_dicts(
            con, "SELECT split, policy, pass_at_stop FROM correctness_summary WHERE score = 'hidden_pass'"
        )}  # fmt: skip
        question = con.execute("SELECT any_value(question) FROM scenarios WHERE scenario_id = ?", [sid]).fetchone()[0]
    finally:
        con.close()

    async def drive() -> dict:
        async with Chromium.start(tmp_path / "profile", width=1400) as page:
            loaded = page.expect("Page.loadEventFired")
            await page.send("Page.navigate", url=f"{(folder / INDEX).resolve().as_uri()}#{sid}")  # the deep link
            await asyncio.wait_for(loaded, 60)
            await page.evaluate(READY)
            await page.evaluate(  # the linked trajectory is shown once its block is inflated: wait for its cards
                "new Promise(r => { const f = () => document.querySelector('.round-card') ? r(true)"
                " : requestAnimationFrame(f); f(); })"
            )
            seen: dict = {}
            seen["heads"] = await page.evaluate(
                "[...document.querySelectorAll('#policy-table th')].map(th => th.textContent)"
            )
            seen["rows"] = await page.evaluate(
                "[...document.querySelectorAll('#policy-table tbody tr')]"
                ".map(tr => [...tr.cells].map(c => c.textContent))"
            )
            seen["charts"] = await page.evaluate(
                "[...document.querySelectorAll('#figures .js-plotly-plot')].map(d => [d.dataset.chart,"
                " ((d.layout.yaxis || {}).title || {}).text || '', d.layout.title.text])"
            )
            seen["title"] = await page.evaluate("document.querySelector('#trajectory h3').textContent")
            seen["marks"] = await page.evaluate(
                "[...document.querySelectorAll('.round-card')].map(c =>"
                " c.querySelector('[data-score=hidden_pass]').textContent)"
            )
            seen["question"] = await page.evaluate("document.querySelector('pre.question').textContent")
            seen["grid"] = await page.evaluate(
                "[...document.querySelectorAll('table.stops tr[data-policy]')].map(tr => tr.dataset.policy)"
            )
            seen["hash"] = await page.evaluate("location.hash")
            # at 1400 px the page does not overflow, and the table's last column scrolls into view within it
            seen["page_width"] = await page.evaluate("document.documentElement.scrollWidth")
            seen["last_th"] = await page.evaluate(
                "(() => { const box = document.querySelector('#policies .scroll'); box.scrollLeft = box.scrollWidth;"
                " const th = [...document.querySelectorAll('#policy-table th')].pop().getBoundingClientRect();"
                " const b = box.getBoundingClientRect(); return [th.left >= b.left, th.right <= b.right + 1,"
                " th.right <= 1400]; })()"
            )
            seen["errors"] = list(page.errors)
            return seen

    seen = _run(drive())
    assert seen["errors"] == []
    assert sid in seen["title"] and seen["hash"] == f"#{sid}"
    assert seen["marks"] == [("hidden_pass ✓ pass" if p else "hidden_pass ✗ fail") for p in passed]
    assert seen["question"] == question and "\n    " in seen["question"]  # the task's code keeps its indentation
    heads = seen["heads"]
    assert "hidden_pass_at_stop" in heads and "IS" not in heads and "non-inferior (IS)" not in heads
    assert "EM" not in heads and "F1" not in heads  # code has no reference answers to score EM / F1 by
    col = heads.index("hidden_pass_at_stop")
    assert seen["rows"] and not any(r[2] == "oracle_is" for r in seen["rows"])
    assert seen["grid"] and "oracle_is" not in seen["grid"]  # nor a stop marker of it
    for r in seen["rows"]:
        assert float(r[col]) == pytest.approx(at_stop[(r[0], r[2])], abs=5e-4)
    assert seen["charts"] and all("IS" not in y + t for _, y, t in seen["charts"])  # no IS chart
    assert {c for c, _, _ in seen["charts"]} == {"pareto", "saved"}
    assert all(y == "hidden_pass at stop (share that passes)" for c, y, _ in seen["charts"] if c == "pareto")
    assert seen["page_width"] <= 1400 and seen["last_th"] == [True, True, True]


def test_an_imported_stores_own_correct_score_shows_in_headless_chromium(tmp_path) -> None:
    """An imported store with its loop's pass/fail `correct` and no judge: the page's table leads with
    correct_at_stop (no IS, no oracle_is row) and each round card says ✓/✗ for `correct`, as the file has it."""
    import json

    from shp_ray.importer.cli import main
    from tests.test_report_outcomes import _rows

    if find_chromium() is None:
        pytest.skip("no Chromium on PATH and none could be installed (make's set-up: apt-get install chromium)")
    rows = _rows(seed=11)[:8]
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(path), "--store", str(tmp_path / "store")]) == 0
    write_report(analysis.ReplayScope(tmp_path / "store"), tmp_path / "report", n_resamples=50)
    sid = rows[0]["id"]

    async def drive() -> dict:
        async with Chromium.start(tmp_path / "profile", width=1400) as page:
            loaded = page.expect("Page.loadEventFired")
            await page.send("Page.navigate", url=f"{(tmp_path / 'report' / INDEX).resolve().as_uri()}#{sid}")
            await asyncio.wait_for(loaded, 60)
            await page.evaluate(READY)
            await page.evaluate(
                "new Promise(r => { const f = () => document.querySelector('.round-card') ? r(true)"
                " : requestAnimationFrame(f); f(); })"
            )
            return {
                "heads": await page.evaluate(
                    "[...document.querySelectorAll('#policy-table th')].map(t => t.textContent)"
                ),
                "policies": await page.evaluate(
                    "[...document.querySelectorAll('#policy-table tbody tr')].map(tr => tr.cells[2].textContent)"
                ),
                "marks": await page.evaluate(
                    "[...document.querySelectorAll('.round-card')].map(c =>"
                    " c.querySelector('[data-score=correct]').textContent)"
                ),
                "errors": list(page.errors),
            }

    seen = _run(drive())
    assert seen["errors"] == []
    assert "correct_at_stop" in seen["heads"] and "IS" not in seen["heads"]
    assert seen["policies"] and "oracle_is" not in seen["policies"]
    passed = [r["scores"]["correct"] == 1.0 for r in rows[0]["rounds"]]
    assert seen["marks"] == [("correct ✓ pass" if p else "correct ✗ fail") for p in passed]
