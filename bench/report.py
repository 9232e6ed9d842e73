"""The HTML report's open time in headless Chromium, for a store of N trajectories.

    shp-bench report --trajectories 10000 --draft-words 150 --opens 5

Writes a synthetic store (storage.synthetic, drafts padded to ``--draft-words`` words: a real local model's
drafts are ~48 words), writes its report (analysis.report: report.md, figures and index.html), then opens
index.html ``--opens`` times in a fresh headless Chromium each (the first open of a new browser profile: no code
cache) and times, in the page, navigation start -> the report's ``report-ready`` event (the policy table, the
charts and the trajectory list drawn), and the time to show the LAST trajectory (its JSON block parsed on
demand). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

READY_MS = (
    "new Promise(r => window.shpReport && window.shpReport.ready ? r(performance.now())"
    " : document.addEventListener('report-ready', () => r(performance.now()), {once: true}))"
)
SHOW_LAST_MS = (
    "new Promise(r => { const t0 = performance.now();"
    " document.addEventListener('trajectory-shown', e => r([performance.now() - t0, e.detail.rounds]), {once: true});"
    " window.shpReport.show(window.shpReport.trajectories - 1); })"
)


async def _open(index: Path, profile: Path) -> dict[str, float]:
    from bench.browser import Chromium

    async with Chromium.start(profile) as page:
        t0 = time.perf_counter()
        await page.open(index)
        ready_ms = await page.evaluate(READY_MS)
        wall = time.perf_counter() - t0
        marks = await page.evaluate("window.shpReport.timings")
        show_ms, rounds = await page.evaluate(SHOW_LAST_MS)
        if page.errors:
            raise RuntimeError(f"console errors: {page.errors[:3]}")
    return {"ready_ms": round(ready_ms, 1), "wall_s": round(wall, 3), "show_last_ms": round(show_ms, 1),
            "rounds_shown": rounds, **{k: round(v, 1) for k, v in marks.items()}}  # fmt: skip


def run(n: int, rounds: int, draft_words: int, times: int, workdir: Path) -> dict[str, Any]:
    from analysis.report import write_report
    from storage.synthetic import SyntheticSpec, write_synthetic_store

    store = workdir / "store"
    t0 = time.perf_counter()
    write_synthetic_store(store, SyntheticSpec(n_trajectories=n, rounds=rounds, draft_words=draft_words, dim=32))
    synth_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    index = write_report(store, workdir / "report", n_resamples=200).with_name("index.html")
    report_s = time.perf_counter() - t0
    return {
        "trajectories": n,
        "rounds": rounds,
        "draft_words": draft_words,
        **opens(index, times, workdir),
        "synth_s": round(synth_s, 1),
        "report_s": round(report_s, 1),
        "data": "synthetic (storage.synthetic: generated drafts and numbers; not a model's output)",
    }


def opens(index: Path, times: int, workdir: Path) -> dict[str, Any]:
    """Open ``index`` ``times`` times, each in a fresh browser and profile; the medians and every run."""
    runs = [asyncio.run(_open(index, workdir / f"profile-{i}")) for i in range(times)]
    ready = [r["ready_ms"] for r in runs]
    return {
        "index_mb": round(index.stat().st_size / 2**20, 1),
        "ready_ms_median": statistics.median(ready),
        "ready_ms_max": max(ready),
        "show_last_ms_median": statistics.median(r["show_last_ms"] for r in runs),
        "runs": runs,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "browser": "headless Chromium (OS package), a fresh profile per open",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="shp-bench report", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trajectories", "-n", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--draft-words", type=int, default=150, help="filler words per draft (a real one: ~48)")
    ap.add_argument("--opens", type=int, default=5, help="opens to time, each in a fresh browser")
    ap.add_argument("--index", type=Path, default=None, help="time this index.html (made before) instead")
    args = ap.parse_args(argv)
    if min(args.trajectories, args.rounds, args.opens) < 1 or args.draft_words < 0:
        ap.error("--trajectories, --rounds and --opens must be >= 1, --draft-words >= 0")
    from bench.browser import find_chromium

    if find_chromium() is None:
        ap.error("no Chromium on PATH (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="shp-bench-report-") as tmp:
        if args.index is not None:
            out = {"index": str(args.index), **opens(args.index, args.opens, Path(tmp))}
        else:
            out = run(args.trajectories, args.rounds, args.draft_words, args.opens, Path(tmp))
    print(json.dumps(out), flush=True)
    return 0
