"""The report's figures (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from analysis.report.cells import n_said, short_labels  # noqa: E402
from analysis.report.data import outcome_label, outcome_points  # noqa: E402
from analysis.report.power import VERDICT_KINDS, verdict_kind  # noqa: E402


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of points no other point beats on both fewer tokens and higher IS."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any((x2 <= x and y2 >= y) and (x2 < x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return front


def shared_points(rows: Sequence[tuple[float, float, str]]) -> list[tuple[float, float, list[str]]]:
    """(tokens, outcome, policies) per distinct point of (tokens, outcome, policy) triples: policies that land on
    the same point share one label (in a small run many cells stop alike, and their labels would print on top of
    each other)."""
    groups: dict[tuple[float, float], list[str]] = {}
    for x, y, name in rows:
        groups.setdefault((round(float(x), 6), round(float(y), 9)), []).append(str(name))
    return [(x, y, sorted(names)) for (x, y), names in groups.items()]


def names_label(names: list[str], width: int = 38) -> str:
    """Names joined and wrapped to ``width`` characters a line."""
    lines, line = [], ""
    for name in names:
        if line and len(line) + 2 + len(name) > width:
            lines.append(line + ",")
            line = name
        else:
            line = f"{line}, {name}" if line else name
    return "\n".join([*lines, line])


def _half(ci: tuple[float, float], mean: float) -> list[float]:
    """[below, above] for an error bar (0 where the interval is undefined: fewer than 2 values)."""
    lo, hi = ci
    return [0.0, 0.0] if math.isnan(lo) or math.isnan(hi) else [max(0.0, mean - lo), max(0.0, hi - mean)]


def _names(rows: Sequence[dict]) -> dict[int, str]:
    """A row's name in a figure: its policy, with its generation's short label when a split holds several."""
    short = short_labels(r["gen_id"] for r in rows)
    many = len(short) > 1
    return {id(r): f"{r['policy']} · {short[str(r['gen_id'])]}" if many else str(r["policy"]) for r in rows}


def pareto(parts: Sequence, path: Path, title: str, primary: str = "is") -> Path:
    """Efficiency-quality plane per split: mean operational tokens vs the primary outcome (IS, or a score at the
    stop) with their 95% intervals and N, the frontier marked; one label per point. A split without the outcome
    says so in its panel."""
    fig, axes = plt.subplots(1, len(parts), figsize=(7.5 * len(parts), 5), squeeze=False)
    pass_fail = any(primary in p.pass_fail for p in parts)
    for ax, part in zip(axes[0], parts, strict=True):
        pts = outcome_points(part, primary)
        rows = [r for r, _, _ in pts]
        names = _names(rows)
        points = shared_points([(float(r["mean_operational_tokens"]), y, names[id(r)]) for r, y, _ in pts])
        front = set(pareto_front([(x, y) for x, y, _ in points]))
        if not pts:
            ax.text(0.5, 0.5, f"no {primary} in split {part.name}", ha="center", va="center", transform=ax.transAxes)
        for r, y, y_ci in pts:
            ci = part.intervals.get((str(r["gen_id"]), str(r["policy"])), {})
            x = float(r["mean_operational_tokens"])
            xerr = _half(ci.get("tokens_ci", (math.nan, math.nan)), x)
            yerr = _half(y_ci, y)
            ax.errorbar(x, y, xerr=[[xerr[0]], [xerr[1]]], yerr=[[yerr[0]], [yerr[1]]], fmt="none",
                        ecolor="tab:gray", elinewidth=0.7, alpha=0.6, zorder=1)  # fmt: skip
        xs = [x for x, _, _ in points]
        middle = (min(xs) + max(xs)) / 2 if xs else 0.0
        for i, (x, y, labels) in enumerate(points):
            ax.scatter(x, y, s=40 if i in front else 18, c="tab:red" if i in front else "tab:blue", zorder=3)
            shown = [n for n in labels if i in front or "@" not in n]
            if shown:  # labels of the right half point left, so they stay inside the axes
                right = x > middle
                ax.annotate(
                    names_label(shown), (x, y), fontsize=7, xytext=(-3 if right else 3, 3), textcoords="offset points",
                    ha="right" if right else "left",
                )  # fmt: skip
        fx = sorted(((points[i][0], points[i][1]) for i in front), key=lambda p: p[0])
        if fx:
            ax.plot([p[0] for p in fx], [p[1] for p in fx], c="tab:red", lw=1, zorder=2)
        ax.legend(handles=[Line2D([], [], c="tab:red", lw=1, label="Pareto frontier"),
                           Line2D([], [], c="tab:gray", lw=0.7, label="95% interval of each mean")],
                  loc="best", fontsize=8)  # fmt: skip
        ax.set_xlabel("mean operational tokens per question")
        ax.set_ylabel(outcome_label(primary, pass_fail))
        ax.set_title(f"split {part.name} · {n_said(rows)} trajectories per policy\n{title}", fontsize=9)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def tokens_saved(parts: Sequence, path: Path, title: str) -> Path:
    """Token saving (%) vs fixed_k{depth} per policy and split, with its 95% interval; coloured by the verdict on
    IS: green only when non-inferior with the power to say so (amber: underpowered)."""
    heights = [max(2.5, 0.22 * len(p.summary) + 1.2) for p in parts]
    fig, axes = plt.subplots(len(parts), 1, figsize=(7.5, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})  # fmt: skip
    for ax, part in zip(axes[:, 0], parts, strict=True):
        rows = sorted(part.summary, key=lambda r: float(r["token_saving"] or 0.0))
        names = _names(rows)
        saving = [100 * float(r["token_saving"] or 0.0) for r in rows]
        err: list[list[float]] = [[], []]
        for r, x in zip(rows, saving, strict=True):
            ci = part.intervals.get((str(r["gen_id"]), str(r["policy"])), {}).get("saving_ci", (math.nan, math.nan))
            below, above = _half((100 * ci[0], 100 * ci[1]), x)
            err[0].append(below)
            err[1].append(above)
        kinds = [verdict_kind(r) if part.has_is else "" for r in rows]  # without IS, no verdict to colour by
        colours = [VERDICT_KINDS[k][1] if k else "tab:blue" for k in kinds]
        ax.barh([names[id(r)] for r in rows], saving, xerr=err, color=colours,
                error_kw={"elinewidth": 0.7, "ecolor": "black", "capsize": 1.5})  # fmt: skip
        ax.axvline(0, c="black", lw=0.8)
        ax.set_xlabel("operational tokens saved vs fixed_k{depth} (%), with its 95% interval")
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title(f"split {part.name} · {n_said(rows)} trajectories per policy · {title}", fontsize=9)
        shown = [k for k in VERDICT_KINDS if k in kinds]
        if shown:  # (no IS: no verdict, no legend)
            ax.legend(handles=[Patch(color=VERDICT_KINDS[k][1], label=f"IS: {VERDICT_KINDS[k][0]}") for k in shown],
                      fontsize=7, loc="lower right")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def clipped_band(rows: Sequence[dict]) -> tuple[list[float], list[float]]:
    """The 95% band of mean d_t, clipped to [0, 2]: a t interval can leave the cosine distance's range, d_t cannot."""
    low = [min(2.0, max(0.0, float(r["ci95_low"]))) for r in rows]
    high = [min(2.0, max(0.0, float(r["ci95_high"]))) for r in rows]
    return low, high


def distance_by_round(parts: Sequence, path: Path, title: str, eps: float) -> Path:
    """Mean d_t per round with its 95% band (clipped to [0, 2]: a cosine distance cannot leave it), one line per
    split and generation, N per round in the legend."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for part in parts:
        short = short_labels(r["gen_id"] for r in part.by_round)
        for gen in sorted(short):
            g = [r for r in part.by_round if str(r["gen_id"]) == gen]
            t = [r["round"] for r in g]
            ns = sorted({int(r["n"]) for r in g})
            n = f"N = {ns[0]}" if len(ns) == 1 else f"N = {ns[0]}–{ns[-1]}"
            ax.plot(t, [r["mean"] for r in g], marker="o", label=f"{part.name} · {short[gen]} ({n} per round)")
            ax.fill_between(t, *clipped_band(g), alpha=0.25)
    ax.axhline(eps, c="tab:red", ls="--", lw=1, label=f"eps = {eps:g}")
    ax.set_ylim(bottom=0.0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("round t")
    ax.set_ylabel("mean d_t (cosine distance to the previous draft)")
    ax.set_title(f"{title}\nband: 95% t interval of the mean, clipped to [0, 2]", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
