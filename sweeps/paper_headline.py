"""The headline of the shipped run: one sentence rendered from one query, so the sentence is what the query prints.

RESULTS.md prints the sentence with the command under it, and the README's headline block (between
``<!-- headline -->`` and ``<!-- /headline -->``) must hold the same sentence and the same query
(tests/test_paper_headline.py reads both). The query reads one split (test, Table III: dev and test are never
pooled) with the LLM judge, whose evaluation tokens every policy that consults IS pays (the paper's setting); its
F1 is answer F1 under the lenient reading (the ``answers_lenient`` view), paired against ``fixed_k6``'s last draft.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from analysis import sql
from analysis.sql.rows import fetch_dicts

HEADLINE_SPLIT = "test"
HEADLINE_QUERY = sql.query("paper_headline").strip()  # analysis/sql/sweeps/paper_headline.sql


def headline_rows(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """The query's rows on a connection opened with the headline's judge (one generation in the store)."""
    return fetch_dicts(con, HEADLINE_QUERY)


def _cost(saving: float) -> str:
    pct = round(100 * saving)
    if pct > 0:
        return f"saves {pct}% of the tokens"
    return "costs as many tokens" if pct == 0 else f"costs {-pct}% more tokens"


def _rounds(x: float) -> str:
    return f"{x:g} round" + ("" if x == 1 else "s")


def headline_sentence(rows: Sequence[dict], judge: str) -> str:
    """The sentence, every number in it a cell of ``rows`` (HEADLINE_QUERY's result) as the query rounds it."""
    n = max(int(r["n"]) for r in rows)
    parts = [
        f"`{r['policy']}` stops at {_rounds(float(r['rounds']))} and {_cost(float(r['saving']))} at "
        f"ΔIS {float(r['delta_is']):+.3f}, ΔF1 {float(r['delta_f1']):+.3f}"
        for r in rows
        if r["policy"] != "fixed_k6"
    ]
    return (
        f"On the **{n} {HEADLINE_SPLIT} questions** (Table III; the dev split apart), judged by the LLM judge "
        f"`{judge}` whose evaluation tokens every policy that consults it pays (the paper's setting; the lexical "
        "judge is free, so not the paper's setting), against `fixed_k6` (six rounds): "
        + "; ".join(parts)
        + ". ΔF1: answer F1 against the gold answer, read leniently (an inline `Answer:`, else the last sentence)."
    )


def command(shown: str, judge: str) -> str:
    """The shp-query command that prints the rows (the README's runnable block); ``shown``: the store as named."""
    body = "\n".join("  " + line for line in HEADLINE_QUERY.splitlines())
    return f"shp-query --store {shown} --judge '{judge}' \"\n{body}\""


def section(shown: str, judge: str, rows: Sequence[dict]) -> list[str]:
    """RESULTS.md's headline: the sentence, then the command whose output it reads."""
    return [
        f"## The headline ({HEADLINE_SPLIT} split, LLM judge, its tokens priced in)",
        "",
        headline_sentence(rows, judge),
        "",
        "```bash",
        command(shown, judge),
        "```",
        "",
    ]
