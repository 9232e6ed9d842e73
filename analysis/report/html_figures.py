"""The HTML report's interactive charts (Plotly, through its Python package): per split, the Pareto plane of the
primary outcome and the token saving, each point or bar with its 95% interval and N, coloured by the verdict on IS
where there is IS."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from analysis.report.cells import n_said, short_labels
from analysis.report.data import outcome_label, outcome_points
from analysis.report.figures import pareto_front
from analysis.report.power import VERDICT_KINDS, verdict_kind
from analysis.stats.outcomes import IS

_NAN = (math.nan, math.nan)


def _err(ci: tuple[float, float], mean: float) -> tuple[float | None, float | None]:
    lo, hi = ci
    if math.isnan(lo) or math.isnan(hi):
        return None, None
    return max(0.0, mean - lo), max(0.0, hi - mean)


def _bars(errors: Sequence[tuple[float | None, float | None]], colour: str) -> dict[str, Any]:
    """Plotly's error bars from (below, above) pairs (None: no interval)."""
    return {"type": "data", "array": [e[1] for e in errors], "arrayminus": [e[0] for e in errors],
            "thickness": 1, "width": 2, "color": colour}  # fmt: skip


def _plain(fig: go.Figure) -> dict[str, Any]:
    return json.loads(pio.to_json(fig, validate=False))


def _names(rows: Sequence[dict]) -> list[str]:
    short = short_labels(r["gen_id"] for r in rows)
    many = len(short) > 1
    return [f"{r['policy']} · {short[str(r['gen_id'])]}" if many else str(r["policy"]) for r in rows]


def _by_verdict(part: Any, picked: Sequence[tuple[dict, float, tuple[float, float]]], primary: str):  # noqa: ANN202
    """Per verdict kind present (one trace each, so the legend names it): its label, colour, and its (row, value,
    interval) triples with their names in the chart. The verdict is the one on IS; on another outcome the points
    are one trace."""
    names = _names([r for r, _, _ in picked])
    if primary != IS:
        yield "policies", "#1f77b4", list(picked), names
        return
    for kind, (label, colour) in VERDICT_KINDS.items():
        pick = [i for i, (r, _, _) in enumerate(picked) if verdict_kind(r) == kind]
        if pick:
            yield f"IS: {label}", colour, [picked[i] for i in pick], [names[i] for i in pick]


def pareto(part: Any, title: str, primary: str = IS) -> dict[str, Any] | None:
    """Mean operational tokens vs the primary outcome per policy (one split), with 95% intervals, N, and the
    frontier; None when the split has no value of the outcome (no empty chart)."""
    picked = outcome_points(part, primary)
    if not picked:
        return None
    label = outcome_label(primary, primary in part.pass_fail)
    fig = go.Figure()
    for name, colour, group, names in _by_verdict(part, picked, primary):
        cis = [part.intervals.get((str(r["gen_id"]), str(r["policy"])), {}) for r, _, _ in group]
        xs = [float(r["mean_operational_tokens"]) for r, _, _ in group]
        ys = [y for _, y, _ in group]
        ex = [_err(c.get("tokens_ci", _NAN), x) for c, x in zip(cis, xs, strict=True)]
        ey = [_err(ci, y) for (_, y, ci) in group]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                name=name,
                marker={"color": colour, "size": 9},
                text=names,
                customdata=[[r["n"]] for r, _, _ in group],
                error_x=_bars(ex, "#999"),
                error_y=_bars(ey, "#999"),
                hovertemplate="<b>%{text}</b><br>tokens %{x:.0f}<br>" + primary + " %{y:.4f}<br>N %{customdata[0]}"
                "<extra></extra>",
            )  # fmt: skip
        )
    points = [(float(r["mean_operational_tokens"]), y) for r, y, _ in picked]
    front = sorted(points[i] for i in pareto_front(points))
    fig.add_trace(
        go.Scatter(x=[p[0] for p in front], y=[p[1] for p in front], mode="lines", name="Pareto frontier",
                   line={"color": "#d62728", "width": 1}, hoverinfo="skip")
    )  # fmt: skip
    rows = [r for r, _, _ in picked]
    fig.update_layout(
        title={"text": f"split {part.name} · {label} · {n_said(rows)} per policy · "
               f"error bars: 95% intervals<br><sup>{title}</sup>", "font": {"size": 13}},
        xaxis_title="mean operational tokens per question", yaxis_title=label,
        height=460, margin={"l": 60, "r": 20, "t": 70, "b": 50}, legend={"font": {"size": 10}},
        template="plotly_white",
    )  # fmt: skip
    return _plain(fig)


def tokens_saved(part: Any, title: str) -> dict[str, Any]:
    """Token saving vs fixed_k{depth} per policy (one split), with its 95% interval, coloured by the verdict."""
    rows = sorted(part.summary, key=lambda r: float(r["token_saving"] or 0.0))
    fig = go.Figure()
    triples = [(r, 0.0, _NAN) for r in rows]
    for label, colour, group, names in _by_verdict(part, triples, IS if part.has_is else "tokens"):
        picked = [r for r, _, _ in group]
        cis = [part.intervals.get((str(r["gen_id"]), str(r["policy"])), {}) for r in picked]
        xs = [100 * float(r["token_saving"] or 0.0) for r in picked]
        saving = [c.get("saving_ci", _NAN) for c in cis]
        ex = [_err((100 * c[0], 100 * c[1]), x) for c, x in zip(saving, xs, strict=True)]
        fig.add_trace(
            go.Bar(
                x=xs,
                y=names,
                orientation="h",
                name=label,
                marker={"color": colour},
                customdata=[[r["n"]] for r in picked],
                error_x=_bars(ex, "#333"),
                hovertemplate="<b>%{y}</b><br>saved %{x:.1f}%<br>N %{customdata[0]}<extra></extra>",
            )  # fmt: skip
        )
    fig.update_layout(
        title={"text": f"split {part.name} · tokens saved vs fixed_k{{depth}} (%) · {n_said(rows)} per policy · "
               f"95% intervals<br><sup>{title}</sup>",
               "font": {"size": 13}},
        yaxis={"categoryorder": "array", "categoryarray": _names(rows), "tickfont": {"size": 10}},
        xaxis_title="operational tokens saved (%)", height=max(320, 22 * len(rows) + 140),
        margin={"l": 160, "r": 20, "t": 70, "b": 50}, template="plotly_white", legend={"font": {"size": 10}},
    )  # fmt: skip
    return _plain(fig)
