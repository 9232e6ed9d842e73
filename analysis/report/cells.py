"""What every report section shares: one way to print a number in a table cell, and a generation's short label."""

from __future__ import annotations

import math
from collections.abc import Iterable


def steady(x: float) -> float:
    """``x`` without its last bits: DuckDB's parallel aggregates add in a different order from run to run, so a
    mean can differ by 1e-16 between two runs, enough to print 0.867 once and 0.868 the next time when it lies
    on a rounding boundary. Rounded to 12 significant digits first, the same data print the same cell in every
    run (a p-value of 1e-30 stays 1e-30)."""
    return float(f"{x:.12g}")


def cell(x: object, nd: int = 3) -> str:
    """A float to ``nd`` decimals (:func:`steady`), None / NaN as "–", anything else as written."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float):
        return f"{steady(x):.{nd}f}"
    return str(x)


def short_labels(gen_ids: Iterable[object]) -> dict[str, str]:
    """Each generation's label in tables, legends and figures: a 64-hex gen_id's first 8 hex digits (an id of at
    most 16 characters, like a synthetic store's, whole), longer only where two ids would otherwise print alike."""
    ids = sorted({str(g) for g in gen_ids})
    for width in (8, 12, 16, 24, 32):
        cut = {g: g if len(g) <= max(width, 16) else g[:width] for g in ids}
        if len(set(cut.values())) == len(ids):
            return cut
    return {g: g for g in ids}


def n_said(rows: Iterable[dict]) -> str:
    """ "N = 60" (or "N = 20–60" when the rows differ; "N = 0" with none), for a figure's title."""
    ns = sorted({int(r["n"]) for r in rows})
    return "N = 0" if not ns else f"N = {ns[0]}" if len(ns) == 1 else f"N = {ns[0]}–{ns[-1]}"
