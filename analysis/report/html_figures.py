"""The HTML report's interactive charts (Plotly, through its Python package): per split, the Pareto plane and the
token saving, each point or bar with its 95% interval and N, coloured by the verdict on IS."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from analysis.report.cells import n_said, short_labels
from analysis.report.figures import pareto_front
from analysis.report.power import VERDICT_KINDS, verdict_kind

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


def _by_verdict(part: Any, rows: Sequence[dict]) -> Iterator[tuple[str, str, list[dict], list[str], list[dict]]]:
    """Per verdict kind present (one trace each, so the legend names it): its label, colour, rows, their names in
    the chart and their intervals."""
    names = _names(rows)
    for kind, (label, colour) in VERDICT_KINDS.items():
        pick = [i for i, r in enumerate(rows) if verdict_kind(r) == kind]
        if pick:
            cis = [part.intervals.get((str(rows[i]["gen_id"]), str(rows[i]["policy"])), {}) for i in pick]
            yield label, colour, [rows[i] for i in pick], [names[i] for i in pick], cis


def pareto(part: Any, title: str) -> dict[str, Any]:
    """Mean operational tokens vs mean IS per policy (one split), with 95% t intervals, N, and the frontier."""
    rows = [r for r in part.summary if r["mean_is"] is not None]
    fig = go.Figure()
    for label, colour, picked, names, cis in _by_verdict(part, rows):
        xs = [float(r["mean_operational_tokens"]) for r in picked]
        ys = [float(r["mean_is"]) for r in picked]
        ex = [_err(c.get("tokens_ci", _NAN), x) for c, x in zip(cis, xs, strict=True)]
        ey = [_err(c.get("is_ci", _NAN), y) for c, y in zip(cis, ys, strict=True)]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                name=f"IS: {label}",
                marker={"color": colour, "size": 9},
                text=names,
                customdata=[[r["n"], r["n_is"]] for r in picked],
                error_x=_bars(ex, "#999"),
                error_y=_bars(ey, "#999"),
                hovertemplate="<b>%{text}</b><br>tokens %{x:.0f}<br>IS %{y:.4f}<br>N %{customdata[0]}"
                "<br>N with IS %{customdata[1]}<extra></extra>",
            )  # fmt: skip
        )
    points = [(float(r["mean_operational_tokens"]), float(r["mean_is"])) for r in rows]
    front = sorted(points[i] for i in pareto_front(points))
    fig.add_trace(
        go.Scatter(x=[p[0] for p in front], y=[p[1] for p in front], mode="lines", name="Pareto frontier",
                   line={"color": "#d62728", "width": 1}, hoverinfo="skip")
    )  # fmt: skip
    fig.update_layout(
        title={"text": f"split {part.name} · {n_said(rows)} per policy · "
               f"error bars: 95% t intervals<br><sup>{title}</sup>", "font": {"size": 13}},
        xaxis_title="mean operational tokens per question", yaxis_title="mean IS of the returned draft",
        height=460, margin={"l": 60, "r": 20, "t": 70, "b": 50}, legend={"font": {"size": 10}},
        template="plotly_white",
    )  # fmt: skip
    return _plain(fig)


def tokens_saved(part: Any, title: str) -> dict[str, Any]:
    """Token saving vs fixed_k{depth} per policy (one split), with its 95% interval, coloured by the verdict."""
    rows = sorted(part.summary, key=lambda r: float(r["token_saving"] or 0.0))
    fig = go.Figure()
    for label, colour, picked, names, cis in _by_verdict(part, rows):
        xs = [100 * float(r["token_saving"] or 0.0) for r in picked]
        saving = [c.get("saving_ci", _NAN) for c in cis]
        ex = [_err((100 * c[0], 100 * c[1]), x) for c, x in zip(saving, xs, strict=True)]
        fig.add_trace(
            go.Bar(
                x=xs,
                y=names,
                orientation="h",
                name=f"IS: {label}",
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
