"""One summary per sweep: every job's policy rows in one table, ``summary.md`` and ``summary.png``.

Each job leaves its rows beside its output (``sweep_job.json``: the overrides that made it, the
``sweep_summary`` rows it printed, its report); at the end of the multirun
:class:`sweeps.summary_callback.SweepSummary` gathers them from the sweep folder -- whichever launcher
ran the jobs, in whichever process -- into one table: a row per job x policy with every outcome (the
judge's IS, each score of the store), sorted (non-inferior on the primary outcome first, then by tokens
saved), the best non-inferior policy marked; ``summary.png`` draws a panel per split and job, every point
labelled; ``summary.html`` puts the whole sweep on one page (sweeps.summary_page, whose ``summarise`` writes the
three).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shp_ray.policy import groups as policy_groups

JOB_FILE = "sweep_job.json"
BEST = "<- best"
IS = "is"  # the judge's IS as the primary outcome's name (analysis.stats.outcomes.IS)


def write_job(output_dir: Path, overrides: Sequence[str], result: Mapping[str, Any]) -> Path:
    """The job's rows for the sweep's summary (``result``: the job's :func:`sweeps.job.as_dict`)."""
    report, html = result.get("report"), result.get("html")  # the browsable report/index.html, when written
    data = {
        "overrides": list(overrides),
        "summary": result.get("summary", []),
        "primary": result.get("primary") or IS,
        "pass_fail": list(result.get("pass_fail") or []),
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
    return interval(row.get("delta_is"), row.get("delta_is_lower95"), row.get("n_is") or 0)


def interval(d: float | None, lower: float | None, n: int) -> tuple[float | None, float | None]:
    """A paired difference's two-sided 95% t interval from its one-sided 95% lower bound over ``n`` pairs."""
    from analysis import scipy_stats as st  # the t quantiles without importing scipy.stats

    if d is None or lower is None or n < 2:
        return None, None
    half = (d - lower) / float(st.t_ppf(0.95, n - 1)) * float(st.t_ppf(0.975, n - 1))
    return d - half, d + half


def outcomes(row: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each outcome of a job's row by name (IS as ``is`` where the judge scored the drafts, every score of the
    row's ``scores`` map): its value at the stop, the paired difference, its 95% CI, the TOST verdict and power."""
    out: dict[str, dict[str, Any]] = {}
    if row.get("n_is"):
        out[IS] = {
            "at_stop": row.get("mean_is"),
            "delta": row.get("delta_is"),
            "ci95": ci95(row),
            **{k: row.get(k) for k in ("non_inferior", "tost_power", "n_needed", "degenerate", "underpowered")},
        }
    for name, v in sorted((row.get("scores") or {}).items()):
        v = v or {}
        if v.get("mean") is None and not v.get("n_paired"):
            continue  # no value: its scorer failed on every draft (the job's console says so), no column of dashes
        out[name] = {
            "at_stop": v.get("mean"),
            "delta": v.get("delta"),
            "ci95": interval(v.get("delta"), v.get("delta_lower95"), v.get("n_paired") or 0),
            **{k: v.get(k) for k in ("non_inferior", "tost_power", "n_needed", "degenerate", "underpowered")},
        }
    return out  # fmt: skip


def primary_of(jobs: Sequence[Mapping[str, Any]]) -> str:
    """The sweep's primary outcome: the one most of its jobs lead with (report.primary, or the task's)."""
    said = [str(j.get("primary") or IS) for j in jobs]
    return max(dict.fromkeys(said), key=said.count) if said else IS


def rows(jobs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A row per job x policy, sorted: non-inferior on the primary outcome first, then most tokens saved; the best
    one marked. ``lead``: the primary outcome of the row ({} where the row has none)."""
    keys = list(swept(jobs))
    primary = primary_of(jobs)
    out = []
    for job in jobs:
        for r in job["summary"]:
            said = outcomes(r)
            out.append({**r, "job": _label(job, keys), "dir": job["dir"], "report": job.get("report"),
                        "delta_is_ci95": ci95(r), "outcomes": said, "lead": said.get(primary, {}),
                        "primary": primary})  # fmt: skip
    out.sort(key=lambda r: (not r["lead"].get("non_inferior"), -(r.get("token_saving") or 0.0), r["job"], r["policy"]))
    best = next((r for r in out if r["lead"].get("non_inferior") and (r.get("token_saving") or 0.0) > 0), None)
    for r in out:
        r["best"] = r is best
    return out


def names(summary: Sequence[Mapping[str, Any]]) -> list[str]:
    """The outcomes of the summary's rows, the primary first (then the scores, then IS)."""
    primary = summary[0]["primary"] if summary else IS
    seen = sorted({n for r in summary for n in r["outcomes"]}, key=lambda n: (n != primary, n == IS, n))
    return seen


def head(summary: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The combined table's headings: each outcome's value and paired difference with its CI, dF1 / dEM where
    the tasks have gold answers, the verdict on the primary outcome."""
    said = [h for n in names(summary) for h in ((f"d{'IS' if n == IS else n} [95% CI]",) if n == IS
                                               else (n, f"d{n} [95% CI]"))]  # fmt: skip
    from analysis.report.data import answers_known  # the report's rule (loaded with the jobs' analysis already)

    answers = ("dF1", "dEM") if answers_known(summary) else ()
    lead = "IS" if not summary or summary[0]["primary"] == IS else summary[0]["primary"]
    return ("job", "policy", "saved", *said, *answers, "N", "power/N", f"non-inferior ({lead})", "report")


def cells(r: Mapping[str, Any], summary: Sequence[Mapping[str, Any]]) -> list[str]:
    said = []
    for n in names(summary):
        o = r["outcomes"].get(n, {})
        lo, hi = o.get("ci95", (None, None))
        ci = f"{_f(o.get('delta'), '+.3f')} [{_f(lo, '+.3f')}, {_f(hi, '+.3f')}]"
        said += [ci] if n == IS else [_f(o.get("at_stop"), ".3f"), ci]
    lead = r["lead"]
    power = "-" if lead.get("degenerate") or lead.get("tost_power") is None else (
        f"{lead['tost_power']:.2f}/{lead['n_needed']}")  # fmt: skip
    verdict = _f(lead.get("non_inferior"), "")
    if lead.get("non_inferior") is False and lead.get("underpowered"):  # a rejection holds at its N: a "no" is weak
        verdict += " (underpowered)"
    verdict += f" {BEST}" if r["best"] else ""
    answers = [_f(r.get("delta_f1"), "+.3f"), _f(r.get("delta_em"), "+.3f")] if "dF1" in head(summary) else []
    policy = r["policy"] + (f" ({r['split']})" if r.get("split") else "")  # a job over both splits: a row each
    return [r["job"], policy, _f(r.get("token_saving"), ".0%"), *said, *answers, _f(r.get("n"), "d"), power, verdict]


def table(summary: Sequence[Mapping[str, Any]]) -> str:
    """The combined table as fixed-width text (what the multirun prints)."""
    heads = head(summary)[:-1]
    body = [cells(r, summary) for r in summary]
    widths = [max(len(h), *(len(c[i]) for c in body)) if body else len(h) for i, h in enumerate(heads)]
    line = "  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() for cells in body]
    return "\n".join(out)


def markdown(summary: Sequence[Mapping[str, Any]], sweep: Mapping[str, list[str]], png: str, page: str) -> str:
    heads = head(summary)
    lead = heads[-2].removeprefix("non-inferior ").strip("()")
    lines = [
        "# Sweep summary",
        "",
        f"{len({r['dir'] for r in summary})} jobs; swept: "
        + (", ".join(f"`{k}` = {', '.join(v)}" for k, v in sweep.items()) or "nothing (one job)"),
        "",
        "A row per job x policy; saved and each outcome's difference are against each job's `fixed_k{max}`, paired, "
        f"with its 95% CI (dF1, dEM: point estimates). The verdict is the paired TOST on {lead}, the primary "
        f"outcome (`report.primary`). Non-inferior first, then by tokens saved; `{BEST}` marks the non-inferior "
        f"policy that saves the most. The whole sweep on one page, a heatmap per split and outcome: [{page}]({page}).",
        "",
        "| " + " | ".join(heads) + " |",
        "|" + "---|" * len(heads),
    ]
    for r in summary:
        link = f"[report]({r['report']})" if r.get("report") else "-"
        lines.append("| " + " | ".join([*cells(r, summary), link]) + " |")
    lines += ["", "The policies above by family, and what each needs from the store:", "",
              *policy_groups.legend(str(r["policy"]) for r in summary)]  # fmt: skip
    return "\n".join([*lines, "", f"![summary]({png})", ""])


def splits(summary: Sequence[Mapping[str, Any]]) -> list[str | None]:
    """The splits of the summary's rows, in first-seen order (a job over dev and test has a row per split)."""
    return list(dict.fromkeys(r.get("split") for r in summary))


def grid(summary: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]], split: str | None, outcome: str):
    """(row keys' values, column values, saving matrix, label matrix) of a sweep over two parameters, for one split
    and outcome: per cell (job), the policy non-inferior on that outcome that saves the most tokens, its saving and
    its difference; NaN and "none" where no policy is non-inferior."""
    keys = list(swept(jobs))[:2]
    ys, xs = swept(jobs)[keys[0]], swept(jobs)[keys[1]]
    saving = [[math.nan] * len(xs) for _ in ys]
    label = [["none"] * len(xs) for _ in ys]
    for job in jobs:
        said = dict(o.lstrip("+~").partition("=")[::2] for o in job["overrides"])
        i, j = ys.index(said[keys[0]]), xs.index(said[keys[1]])
        ok = [r for r in summary if r["dir"] == job["dir"] and r.get("split") == split
              and r["outcomes"].get(outcome, {}).get("non_inferior")]  # fmt: skip
        if ok:
            top = max(ok, key=lambda r: r.get("token_saving") or 0.0)
            saving[i][j] = top.get("token_saving") or 0.0
            diff = top["outcomes"][outcome].get("delta")
            said = "IS" if outcome == IS else outcome
            label[i][j] = f"{top['policy']}\n{saving[i][j]:.0%}, d{said} {_f(diff, '+.3f')}"
    return ys, xs, saving, label


def figure(summary: Sequence[Mapping[str, Any]], path: Path, per_row: int = 4) -> Path:
    """The primary outcome's paired difference (95% CI) against tokens saved: a panel per split and job, every
    point labelled with its policy, coloured by the verdict."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from analysis.report.figures import names_label, shared_points

    in_order = sorted(summary, key=lambda r: (len(r["dir"]), r["dir"]))  # the jobs in the order they ran
    panels = [(split, d) for split in splits(summary)
              for d in dict.fromkeys(r["dir"] for r in in_order if r.get("split") == split)]  # fmt: skip
    cols = min(per_row, max(1, len(panels)))
    nrows = max(1, -(-len(panels) // cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.4 * nrows), squeeze=False, sharex=True)
    primary = summary[0]["primary"] if summary else IS
    said = "IS" if primary == IS else primary
    for ax, (split, d) in zip(axes.flat, panels, strict=False):
        pts = [r for r in summary if r.get("split") == split and r["dir"] == d]
        drawn = [r for r in pts if r["lead"].get("delta") is not None]
        for r in drawn:
            lead = r["lead"]
            colour = ("tab:green" if lead.get("non_inferior") else "tab:olive" if lead.get("underpowered")
                      else "tab:grey")  # fmt: skip
            lo, hi = lead.get("ci95", (None, None))
            x, y = r.get("token_saving") or 0.0, lead["delta"]
            err = [[0.0 if lo is None else y - lo], [0.0 if hi is None else hi - y]]
            ax.errorbar([x], [y], yerr=err, fmt="o", color=colour, capsize=2, ms=4)
        # One label per point: policies that stop alike (a baseline and the cells that never stop early) land on
        # the same spot, and their names printed on top of each other could not be read (the report's rule).
        triples = [(r.get("token_saving") or 0.0, r["lead"]["delta"], r["policy"]) for r in drawn]
        for x, y, names in shared_points(triples):
            ax.annotate(names_label(names, width=30), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.axhline(0.0, color="black", lw=0.5)
        ax.set_title(f"{pts[0]['job'] if pts else d}" + (f" · split {split}" if split else ""), fontsize=8)
        ax.set_ylabel(f"d{said} (95% CI)", fontsize=8)
        ax.set_xlabel("tokens saved vs fixed_k{max}", fontsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(f"every job x policy: green non-inferior on {said}, olive not (underpowered), grey not", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
