"""The report's costs in dollars: which price table, what it could not price, and each policy live vs batch.

The policy tables (cf. SHP Tables II/III) carry two cost cells beside the operational tokens -- what a
question costs if every call were live, and if every call were batch. This section adds, per generation,
what the policies cost as the calls were actually paid, their evaluation cost, and the totals over the N
questions, under a line naming the price table's source and date. A model the table does not price is
said so in bold: its cells are "–", never $0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from analysis.replay import costs
from analysis.report.cells import cell
from shp_ray.providers.prices import PriceTable


def usd(x: float | None, missing: str = "–") -> str:
    """A dollar amount for a table cell: cents from $1 up, micro-dollars below; ``missing`` when unpriced (NULL)."""
    if x is None:
        return missing
    v = float(x)
    return "$0" if v == 0 else f"${v:,.2f}" if v >= 1 else f"${v:.6f}"


def collect(con: duckdb.DuckDBPyConnection, judge: str | None) -> dict[str, Any]:
    """What the section needs of the connection: the sentences on what the table could not price."""
    return {"unpriced": [u.sentence(judge) for u in costs.unpriced(con)]}


def price_lines(prices: PriceTable | None, info: Mapping[str, Any]) -> list[str]:
    """The bullet naming the price table (its source and date), then any unpriced model, in bold."""
    if prices is None:
        return ["- Prices: **none given**: every cost is unknown (–)."]
    lines = [
        f"- Prices: {' '.join(prices.source.split())}, **as of {prices.as_of}** (US dollars per million tokens; "
        "a batch call costs list × (1 − batch discount); a call without tokens, like the lexical judge's, $0)."
    ]
    lines += [f"- **Unpriced**: {said}" for said in info.get("unpriced", [])]
    return lines


def section(gen: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per policy of one generation: operational cost as paid, live, batch (per question and over N), and
    the evaluation cost (judging the returned draft: a measurement, never charged to the policy)."""
    lines = [
        f"### Costs in dollars (generation `{gen}`)",
        "",
        "Operational cost per question as the calls were paid, if every call were live, if every call were batch; "
        "the totals over the N questions; the evaluation cost per question (judging the returned draft, never "
        "charged to the policy).",
        "",
        "| policy | op. tokens | $ as paid | $ live | $ batch | total live | total batch | $ evaluation |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        n = r["n"]

        def total(key: str, r: Mapping[str, Any] = r, n: int = n) -> str:
            return usd(None if r.get(key) is None else float(r[key]) * int(n))

        lines.append(
            f"| {r['policy']} | {cell(r['mean_operational_tokens'], 0)} | {usd(r.get('mean_operational_cost_usd'))} "
            f"| {usd(r.get('mean_operational_cost_live_usd'))} | {usd(r.get('mean_operational_cost_batch_usd'))} "
            f"| {total('mean_operational_cost_live_usd')} | {total('mean_operational_cost_batch_usd')} "
            f"| {usd(r.get('mean_evaluation_cost_usd'))} |"
        )
    return lines + [""]
