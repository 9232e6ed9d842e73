"""The sweep on one page: ``summary.html`` beside ``summary.md`` and ``summary.png`` (:func:`summarise` writes all
three at the end of a multirun).

Per split: the combined table (the rows of :func:`sweeps.summary.rows`, the cells ``summary.md`` prints, each with a
link to its job's report) and, for a sweep over two parameters, a heatmap per outcome (the judge's IS, every score of
the store): per cell the policy non-inferior on that outcome that saves the most tokens. Plain HTML and CSS, no
script and nothing fetched: it opens from disk in any browser.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from shp_ray.policy import groups as policy_groups
from sweeps import summary as sweep_summary

PAGE = "summary.html"
_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 1.5em 3em; color: #222; }
.scroll { overflow: auto; max-width: 100%; max-height: 80vh; }
table { border-collapse: collapse; font-size: 12.5px; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ddd; padding: 2px 6px; white-space: nowrap; text-align: right; }
th { background: #f4f4f4; position: sticky; top: 0; }
td.text { text-align: left; } tr.best td { font-weight: bold; }
table.heatmap td { text-align: center; white-space: pre-line; min-width: 9em; }
.none { color: #888; }
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _link(report: object, folder: Path) -> str:
    """A link to a job's report, relative to the page when the report lies under the sweep folder."""
    if not report:
        return "-"
    path = Path(str(report))
    try:
        href = os.path.relpath(path, folder) if path.is_absolute() else str(path)
    except ValueError:  # another drive
        href = str(path)
    return f'<a href="{_e(href)}">report</a>'


def table_html(summary: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], folder: Path) -> str:
    """The combined table of ``rows`` (one split's), with the headings and cells of summary.md."""
    heads = sweep_summary.head(summary)
    out = ['<div class="scroll"><table class="combined"><thead><tr>']
    out += [f"<th>{_e(h)}</th>" for h in heads]
    out.append("</tr></thead><tbody>")
    for r in rows:
        cells = sweep_summary.cells(r, summary)
        out.append('<tr class="best">' if r["best"] else "<tr>")
        out += [f'<td class="text">{_e(c)}</td>' if i < 2 else f"<td>{_e(c)}</td>" for i, c in enumerate(cells)]
        out.append(f"<td>{_link(r.get('report'), folder)}</td></tr>")
    return "".join(out) + "</tbody></table></div>"


def _colour(value: float, top: float) -> str:
    """A cell's background: white at no saving to a full green at the most any cell saves."""
    share = 0.0 if math.isnan(value) or top <= 0 else max(0.0, min(1.0, value / top))
    g = int(255 - 120 * share)
    return f"rgb({g}, {int(255 - 40 * share)}, {g})"


def heatmap_html(summary: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]], split: str | None,
                 outcome: str) -> str:  # fmt: skip
    """One split's and outcome's heatmap over the sweep's two parameters."""
    ys, xs, saving, label = sweep_summary.grid(summary, jobs, split, outcome)
    keys = list(sweep_summary.swept(jobs))[:2]
    top = max([v for row in saving for v in row if not math.isnan(v)], default=0.0)
    out = [f'<table class="heatmap" data-outcome="{_e(outcome)}"><tr><th>{_e(keys[0])} \\ {_e(keys[1])}</th>']
    out += [f"<th>{_e(x)}</th>" for x in xs]
    out.append("</tr>")
    for i, y in enumerate(ys):
        out.append(f"<tr><th>{_e(y)}</th>")
        for j in range(len(xs)):
            v = saving[i][j]
            cls = ' class="none"' if math.isnan(v) else ""
            out.append(f'<td{cls} style="background: {_colour(v, top)}">{_e(label[i][j])}</td>')
        out.append("</tr>")
    return "".join(out) + "</table>"


def families_html(policies: Iterable[str]) -> str:
    """The policies grouped by family (shp_ray.policy.groups), each family with what it needs."""
    out = ['<table class="families"><tr><th>family</th><th>policies</th><th>needs</th></tr>']
    for family, names, needs in policy_groups.families(policies):
        out.append(f"<tr><td>{_e(family)}</td><td>{_e(', '.join(names))}</td><td>{_e(needs)}</td></tr>")
    return "".join(out) + "</table>"


def render(summary: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]], folder: Path) -> str:
    """The page's text."""
    sweep = sweep_summary.swept(jobs)
    primary = summary[0]["primary"] if summary else sweep_summary.IS
    body = [
        "<h1>Sweep summary</h1>",
        f"<p>{len(jobs)} jobs; swept: "
        + (_e(", ".join(f"{k} = {', '.join(v)}" for k, v in sweep.items())) or "nothing (one job)")
        + f". Primary outcome: <b>{_e('IS' if primary == sweep_summary.IS else primary)}</b> (report.primary). "
        "Saved and each outcome's difference are against each job's fixed_k{max}, paired, with its 95% CI; the "
        "verdict is the paired TOST on the primary outcome. Each row links to its job's report.</p>",
    ]
    outcomes = sweep_summary.names(summary)
    for split in sweep_summary.splits(summary):
        on = f"split {split}" if split else "no split recorded"
        rows = [r for r in summary if r.get("split") == split]
        body += [f'<section data-split="{_e(split or "")}"><h2>{_e(on)}</h2>', table_html(summary, rows, folder)]
        if len(sweep) == 2:
            for outcome in outcomes:
                name = "IS" if outcome == sweep_summary.IS else outcome
                body += [f"<h3>{_e(on)} · tokens saved by the policy non-inferior on {_e(name)} that saves most</h3>",
                         heatmap_html(summary, jobs, split, outcome)]  # fmt: skip
        else:
            body.append(f"<p>No heatmap: it needs a sweep over two parameters; this one swept {len(sweep)}.</p>")
        body.append("</section>")
    body += ["<h2>The policies by family, and what each needs from the store</h2>",
             families_html(str(r["policy"]) for r in summary)]  # fmt: skip
    body.append('<p><img src="summary.png" alt="every job x policy: the primary outcome against tokens saved"></p>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>shp-ray sweep summary</title>'
        f"<style>{_STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )


def write(summary: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]], path: Path) -> Path:
    path.write_text(render(summary, jobs, path.parent), encoding="utf-8")
    return path


def summarise(sweep_dir: Path) -> str | None:
    """Write summary.md, summary.png and summary.html (the sweep on one page) into the sweep folder; the combined
    table (None: no job's rows)."""
    jobs = sweep_summary.load_jobs(sweep_dir)
    if not jobs:
        return None
    summary = sweep_summary.rows(jobs)
    png = sweep_summary.figure(summary, Path(sweep_dir) / "summary.png")
    page = write(summary, jobs, Path(sweep_dir) / PAGE)
    md = sweep_summary.markdown(summary, sweep_summary.swept(jobs), png.name, page.name)
    (Path(sweep_dir) / "summary.md").write_text(md, encoding="utf-8")
    return sweep_summary.table(summary)
