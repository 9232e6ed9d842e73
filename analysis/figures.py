"""The report's figures (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of points no other point beats on both fewer tokens and higher IS."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any((x2 <= x and y2 >= y) and (x2 < x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return front


def shared_points(rows: Sequence[dict]) -> list[tuple[float, float, list[str]]]:
    """(tokens, IS, policies) per distinct point: policies that land on the same point share one label
    (in a small run many cells stop alike, and their labels would print on top of each other)."""
    groups: dict[tuple[float, float], list[str]] = {}
    for r in rows:
        key = (round(float(r["mean_operational_tokens"]), 6), round(float(r["mean_is"]), 9))
        groups.setdefault(key, []).append(str(r["policy"]))
    return [(x, y, sorted(names)) for (x, y), names in groups.items()]


def _label(names: list[str], width: int = 38) -> str:
    """Names joined and wrapped to ``width`` characters a line."""
    lines, line = [], ""
    for name in names:
        if line and len(line) + 2 + len(name) > width:
            lines.append(line + ",")
            line = name
        else:
            line = f"{line}, {name}" if line else name
    return "\n".join([*lines, line])


def pareto(summary: Sequence[dict], path: Path, title: str) -> Path:
    """Efficiency-quality plane: mean operational tokens vs mean IS, frontier marked; one label per point."""
    rows = [r for r in summary if r["mean_is"] is not None]
    points = shared_points(rows)
    front = set(pareto_front([(x, y) for x, y, _ in points]))
    fig, ax = plt.subplots(figsize=(7.5, 5))
    xs = [x for x, _, _ in points]
    middle = (min(xs) + max(xs)) / 2 if xs else 0.0
    for i, (x, y, names) in enumerate(points):
        ax.scatter(x, y, s=40 if i in front else 18, c="tab:red" if i in front else "tab:blue", zorder=3)
        shown = [n for n in names if i in front or "@" not in n]
        if shown:  # labels of the right half point left, so they stay inside the axes
            right = x > middle
            ax.annotate(
                _label(shown), (x, y), fontsize=7, xytext=(-3 if right else 3, 3), textcoords="offset points",
                ha="right" if right else "left",
            )  # fmt: skip
    fx = sorted(((points[i][0], points[i][1]) for i in front), key=lambda p: p[0])
    if fx:
        ax.plot([p[0] for p in fx], [p[1] for p in fx], c="tab:red", lw=1, zorder=2, label="Pareto frontier")
        ax.legend(loc="best", fontsize=8)
    ax.set_xlabel("mean operational tokens per question")
    ax.set_ylabel("mean IS of the returned draft")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def tokens_saved(summary: Sequence[dict], path: Path, title: str) -> Path:
    """Token saving (%) vs fixed_k{depth} per policy, non-inferior IS in green."""
    rows = sorted(summary, key=lambda r: float(r["token_saving"] or 0.0))
    fig, ax = plt.subplots(figsize=(7.5, max(3.0, 0.22 * len(rows) + 1)))
    colors = ["tab:green" if r["non_inferior"] else "tab:gray" for r in rows]
    ax.barh([str(r["policy"]) for r in rows], [100 * float(r["token_saving"] or 0.0) for r in rows], color=colors)
    ax.axvline(0, c="black", lw=0.8)
    ax.set_xlabel("operational tokens saved vs fixed_k{depth} (%)  -- green: IS non-inferior")
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def distance_by_round(rows: Sequence[dict], path: Path, title: str, eps: float) -> Path:
    """Mean d_t per round with its 95% band, one line per generation config."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for gen in sorted({r["gen_id"] for r in rows}):
        g = [r for r in rows if r["gen_id"] == gen]
        t = [r["round"] for r in g]
        ax.plot(t, [r["mean"] for r in g], marker="o", label=str(gen))
        ax.fill_between(t, [r["ci95_low"] for r in g], [r["ci95_high"] for r in g], alpha=0.25)
    ax.axhline(eps, c="tab:red", ls="--", lw=1, label=f"eps = {eps:g}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("round t")
    ax.set_ylabel("mean d_t (cosine distance to the previous draft)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
