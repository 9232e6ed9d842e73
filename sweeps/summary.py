"""One summary per sweep: every job's policy rows in one table, ``summary.md`` and ``summary.png``.

Each job leaves its rows beside its output (``sweep_job.json``: the overrides that made it, the
``sweep_summary`` rows it printed, its report); at the end of the multirun
:class:`sweeps.summary_callback.SweepSummary` gathers them from the sweep folder -- whichever launcher
ran the jobs, in whichever process -- into one table: a row per job x policy, sorted (non-inferior
first, then by tokens saved), the best non-inferior policy marked. A sweep over two parameters is also
drawn as a heatmap of the best non-inferior policy's token saving per cell.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

JOB_FILE = "sweep_job.json"
BEST = "<- best"
HEAD = ("job", "policy", "saved", "dIS [95% CI]", "dF1", "dEM", "N", "power/N", "non-inferior", "report")


def write_job(output_dir: Path, overrides: Sequence[str], result: Mapping[str, Any]) -> Path:
    """The job's rows for the sweep's summary (``result``: the job's :func:`sweeps.job.as_dict`)."""
    report, html = result.get("report"), result.get("html")  # the browsable report/index.html, when written
    data = {
        "overrides": list(overrides),
        "summary": result.get("summary", []),
        "report": html if html and Path(html).exists() else report,
    }
    path = Path(output_dir) / JOB_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, default=str, indent=1), encoding="utf-8")
    return path


def load_jobs(sweep_dir: Path) -> list[dict[str, Any]]:
    """Every job's rows under the sweep folder, in job order (``<sweep_dir>/<num>/sweep_job.json``)."""
    found = sorted(Path(sweep_dir).glob(f"*/{JOB_FILE}"), key=lambda p: (len(p.parent.name), p.parent.name))
    return [{**json.loads(p.read_text(encoding="utf-8")), "dir": p.parent.name} for p in found]


def swept(jobs: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The overridden keys whose value differs between jobs, with their values in first-seen order."""
    values: dict[str, list[str]] = {}
    for job in jobs:
        for item in job["overrides"]:
            key, _, value = item.partition("=")
            seen = values.setdefault(key.lstrip("+~"), [])
            if value not in seen:
                seen.append(value)
    return {k: v for k, v in values.items() if len(v) > 1}


def _label(job: Mapping[str, Any], keys: Sequence[str]) -> str:
    said = dict(o.lstrip("+~").partition("=")[::2] for o in job["overrides"])
    return " ".join(f"{k}={said.get(k, '-')}" for k in keys) or f"#{job['dir']}"


def _f(value: object, fmt: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)


def ci95(row: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The two-sided 95% CI of dIS, from the TOST's one-sided 95% lower bound (the same t-based standard error)."""
    from analysis import scipy_stats as st  # the t quantiles without importing scipy.stats

    d, lower, n = row.get("delta_is"), row.get("delta_is_lower95"), row.get("n_is") or 0
    if d is None or lower is None or n < 2:
        return None, None
    half = (d - lower) / float(st.t_ppf(0.95, n - 1)) * float(st.t_ppf(0.975, n - 1))
    return d - half, d + half


def rows(jobs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A row per job x policy, sorted: non-inferior first, then most tokens saved; the best one marked."""
    keys = list(swept(jobs))
    out = []
    for job in jobs:
        for r in job["summary"]:
            lo, hi = ci95(r)
            out.append({**r, "job": _label(job, keys), "dir": job["dir"], "report": job.get("report"),
                        "delta_is_ci95": (lo, hi)})  # fmt: skip
    out.sort(key=lambda r: (not r.get("non_inferior"), -(r.get("token_saving") or 0.0), r["job"], r["policy"]))
    best = next((r for r in out if r.get("non_inferior") and (r.get("token_saving") or 0.0) > 0), None)
    for r in out:
        r["best"] = r is best
    return out


def _cells(r: Mapping[str, Any]) -> list[str]:
    lo, hi = r["delta_is_ci95"]
    ci = f"{_f(r.get('delta_is'), '+.3f')} [{_f(lo, '+.3f')}, {_f(hi, '+.3f')}]"
    power = "-" if r.get("degenerate") or r.get("tost_power") is None else f"{r['tost_power']:.2f}/{r['n_needed']}"
    verdict = _f(r.get("non_inferior"), "")
    if r.get("non_inferior") is False and r.get("underpowered"):  # a rejection holds at its N: only a "no" is weak
        verdict += " (underpowered)"
    verdict += f" {BEST}" if r["best"] else ""
    scores = [_f(r.get("delta_f1"), "+.3f"), _f(r.get("delta_em"), "+.3f")]
    policy = r["policy"] + (f" ({r['split']})" if r.get("split") else "")  # a job over both splits: a row each
    return [r["job"], policy, _f(r.get("token_saving"), ".0%"), ci, *scores, _f(r.get("n"), "d"), power, verdict]


def table(summary: Sequence[Mapping[str, Any]]) -> str:
    """The combined table as fixed-width text (what the multirun prints)."""
    body = [_cells(r) for r in summary]
    widths = [max(len(h), *(len(c[i]) for c in body)) if body else len(h) for i, h in enumerate(HEAD[:-1])]
    line = "  ".join(h.ljust(w) for h, w in zip(HEAD[:-1], widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() for cells in body]
    return "\n".join(out)


def markdown(summary: Sequence[Mapping[str, Any]], sweep: Mapping[str, list[str]], png: str) -> str:
    lines = [
        "# Sweep summary",
        "",
        f"{len({r['dir'] for r in summary})} jobs; swept: "
        + (", ".join(f"`{k}` = {', '.join(v)}" for k, v in sweep.items()) or "nothing (one job)"),
        "",
        "A row per job x policy; saved and dIS are against each job's `fixed_k{max}`; dIS with its 95% CI "
        "(dF1, dEM: point estimates). Non-inferior first, then by tokens saved; "
        f"`{BEST}` marks the non-inferior policy that saves the most.",
        "",
        "| " + " | ".join(HEAD) + " |",
        "|" + "---|" * len(HEAD),
    ]
    for r in summary:
        link = f"[report]({r['report']})" if r.get("report") else "-"
        lines.append("| " + " | ".join([*_cells(r), link]) + " |")
    return "\n".join([*lines, "", f"![summary]({png})", ""])


def _grid(summary: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]], keys: Sequence[str]):
    """(row values, column values, saving matrix, label matrix) of the best non-inferior policy per cell."""
    ys, xs = swept(jobs)[keys[0]], swept(jobs)[keys[1]]
    saving = [[math.nan] * len(xs) for _ in ys]
    label = [["none"] * len(xs) for _ in ys]
    for job in jobs:
        said = dict(o.lstrip("+~").partition("=")[::2] for o in job["overrides"])
        i, j = ys.index(said[keys[0]]), xs.index(said[keys[1]])
        ok = [r for r in summary if r["dir"] == job["dir"] and r.get("non_inferior")]
        if ok:
            top = max(ok, key=lambda r: r.get("token_saving") or 0.0)
            saving[i][j] = top.get("token_saving") or 0.0
            label[i][j] = f"{top['policy']}\n{saving[i][j]:.0%}"
    return ys, xs, saving, label


def figure(summary: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """dIS (95% CI) against tokens saved for every row; with two swept parameters, also the heatmap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(swept(jobs))
    grid = len(keys) == 2
    fig, axes = plt.subplots(1, 2 if grid else 1, figsize=(12 if grid else 7, 5), squeeze=False)
    ax = axes[0][0]
    for ok, colour in ((True, "tab:green"), (False, "tab:grey"), (None, "tab:orange")):
        pts = [r for r in summary if r.get("non_inferior") is ok and r.get("delta_is") is not None]
        if ok is False and pts:  # a rejection holds at its N: only a "no" can be underpowered
            pts_weak = [r for r in pts if r.get("underpowered")]
            pts = [r for r in pts if not r.get("underpowered")]
            _points(ax, pts_weak, "tab:olive", "not non-inferior, underpowered")
        _points(ax, pts, colour, {True: "non-inferior", False: "not non-inferior", None: "no test"}[ok])
    ax.axhline(0.0, color="black", lw=0.5)
    ax.set_xlabel("tokens saved vs fixed_k{max}")
    ax.set_ylabel("dIS (95% CI)")
    ax.set_title(f"every job x policy (N = {max((r.get('n') or 0) for r in summary) if summary else 0})")
    ax.legend(fontsize=8)
    if grid:
        ys, xs, saving, label = _grid(summary, jobs, keys)
        hm = axes[0][1]
        im = hm.imshow(saving, cmap="viridis", vmin=0.0, vmax=max(0.01, *(v for r in saving for v in r if v == v)))
        hm.set_xticks(range(len(xs)), xs)
        hm.set_yticks(range(len(ys)), ys)
        hm.set_xlabel(keys[1])
        hm.set_ylabel(keys[0])
        hm.set_title("tokens saved by the best non-inferior policy")
        for i, row in enumerate(label):
            for j, text in enumerate(row):
                hm.text(j, i, text, ha="center", va="center", fontsize=7, color="white")
        fig.colorbar(im, ax=hm)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _points(ax: Any, pts: Sequence[Mapping[str, Any]], colour: str, name: str) -> None:
    if not pts:
        return
    x = [r.get("token_saving") or 0.0 for r in pts]
    y = [r["delta_is"] for r in pts]
    err = [0.0 if r["delta_is_ci95"][0] is None else r["delta_is"] - r["delta_is_ci95"][0] for r in pts]
    ax.errorbar(x, y, yerr=err, fmt="o", color=colour, label=name, capsize=2, ms=4)


def summarise(sweep_dir: Path) -> str | None:
    """Write summary.md and summary.png into the sweep folder; the combined table (None: no job's rows)."""
    jobs = load_jobs(sweep_dir)
    if not jobs:
        return None
    summary = rows(jobs)
    png = figure(summary, jobs, Path(sweep_dir) / "summary.png")
    (Path(sweep_dir) / "summary.md").write_text(markdown(summary, swept(jobs), png.name), encoding="utf-8")
    return table(summary)
