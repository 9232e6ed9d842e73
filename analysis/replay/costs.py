"""Costs in dollars inside a DuckDB connection: the price table as tables, and what it could not price.

    prices             the price table (shp_ray.providers.prices): provider_kind, model, input_per_mtok,
                       output_per_mtok, cached_input_per_mtok, batch_discount, note
    generation_prices  per generation: the prices of its writer/critic model (loop_*) and of the judge
                       (judge_*), looked up in the table here, in Python, by PriceTable.lookup -- NULL where
                       the table has none

replay_inputs carries a trajectory's prices; the replay's cost columns (analysis/sql/cost_text.py) price its
operational and evaluation tokens with them, each call at the mode it was paid (live / batch). Prices are
the connection's data, like the ``policies`` rows: change the table and reconnect.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import duckdb

from analysis import sql
from shp_ray.providers.prices import ModelPrice, PriceTable

# The LLM judge is stored as "llm:<model>" (shp_ray.generation.judge.llm_judge_name; analysis may not import
# the generation, so tests/test_costs.py holds the two equal). Any other judge (lexical, synthetic) has no model.
_LLM_JUDGE = "llm:"

_PRICE_COLUMNS = (
    ("provider_kind", "VARCHAR"), ("model", "VARCHAR"), ("input_per_mtok", "DOUBLE"), ("output_per_mtok", "DOUBLE"),
    ("cached_input_per_mtok", "DOUBLE"), ("batch_discount", "DOUBLE"), ("note", "VARCHAR"),
)  # fmt: skip
_GENERATION_COLUMNS = (
    ("gen_id", "VARCHAR"), ("provider_kind", "VARCHAR"), ("model", "VARCHAR"), ("judge_model", "VARCHAR"),
    ("loop_input_per_mtok", "DOUBLE"), ("loop_output_per_mtok", "DOUBLE"), ("loop_batch_discount", "DOUBLE"),
    ("judge_input_per_mtok", "DOUBLE"), ("judge_output_per_mtok", "DOUBLE"), ("judge_batch_discount", "DOUBLE"),
)  # fmt: skip


def judge_model(judge: str | None) -> str | None:
    """The model an LLM judge ran (``llm:<model>``); None for a judge that is no model (lexical, synthetic)."""
    if judge is None or not judge.startswith(_LLM_JUDGE):
        return None
    return judge[len(_LLM_JUDGE) :] or None


def _values(columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[object]]) -> str:
    return ",\n  ".join(
        "(" + ", ".join(sql.literal(v, t) for v, (_, t) in zip(r, columns, strict=True)) + ")" for r in rows
    )


def _table(create: str, name: str, columns: Sequence[tuple[str, str]], rows: list[Sequence[object]]) -> str:
    """The temp table's CREATE and (when there are rows) its INSERT: one script, like the policies table's."""
    return create + ";\n" + sql.query("rows_insert", table=name, values=_values(columns, rows)) if rows else create


# What a judge that is no model and made no call costs: nothing, whatever the table (the lexical judge).
_NO_CALLS = ModelPrice(0.0, 0.0, note="a judge that makes no call (not an LLM)")


def generation_price_rows(
    con: duckdb.DuckDBPyConnection, generations: str, prices: PriceTable, judge: str | None, judge_where: str
) -> list[tuple[object, ...]]:
    """One generation_prices row per generation of the relation ``generations`` (a table source); the judge
    (``judge_where`` picks its rows of ``judgments_raw``) by its model, or at $0 if it is none and made no call."""
    jm = judge_model(judge)
    ((judge_tokens,),) = con.execute(sql.query("judge_tokens", judge_where=judge_where)).fetchall()
    free_judge = jm is None and not judge_tokens

    def three(price: ModelPrice | None) -> tuple[float | None, ...]:
        return (price.input_per_mtok, price.output_per_mtok, price.batch_discount) if price else (None, None, None)

    rows = con.execute(sql.query("cost_generations", generations=generations)).fetchall()
    return [
        (
            g,
            kind,
            model,
            jm,
            *three(prices.lookup(kind, model)),
            *three(_NO_CALLS if free_judge else prices.lookup(kind, jm)),
        )
        for g, model, kind in rows
    ]


def prices_statement(prices: PriceTable | None) -> str:
    """The ``prices`` table (no price table: empty)."""
    entries = [] if prices is None else prices.entries()
    rows = [
        (k, m, p.input_per_mtok, p.output_per_mtok, p.cached_input_per_mtok, p.batch_discount, p.note)
        for k, m, p in entries
    ]
    return _table(sql.query("prices_table"), "prices", _PRICE_COLUMNS, rows)


def generation_prices_statement(rows: list[tuple[object, ...]]) -> str:
    """The ``generation_prices`` table (:func:`generation_price_rows`; none: every cost NULL)."""
    return _table(sql.query("generation_prices_table"), "generation_prices", _GENERATION_COLUMNS, rows)


@dataclass(frozen=True)
class Unpriced:
    """A generation whose costs are (partly) NULL, and why."""

    gen_id: str
    provider_kind: str | None
    model: str | None
    judge_model: str | None
    loop: bool  # its writer/critic model has no price: every cost column of it is NULL
    judge: bool  # its judge used tokens and has no price: evaluation costs and IS-consulting policies NULL

    def sentence(self, judge: str | None) -> str:
        """What the report and shp-sweep print under their cost columns."""
        kind = self.provider_kind or "(no provider kind)"
        said = []
        if self.loop:
            said.append(f"no price for the model {kind}/{self.model}: every cost of generation `{self.gen_id}` is NULL")
        if self.judge:
            said.append(
                f"no price for the judge {judge or self.judge_model!r} on {kind}: the evaluation cost and the "
                f"operational cost of policies that consult IS are NULL for generation `{self.gen_id}`"
            )
        return "; ".join(said) + (
            " (unpriced is not free: add it to the price table, e.g. shp-sweep "
            "prices.models.<kind>.<model>.input_per_mtok=... output_per_mtok=..., or --prices FILE)"
        )


def unpriced(con: duckdb.DuckDBPyConnection) -> list[Unpriced]:
    """The generations of the replay that the connection's price table leaves (partly) unpriced."""
    return [
        Unpriced(g, k, m, jm, bool(lu), bool(ju))
        for g, k, m, jm, lu, ju in con.execute(sql.query("cost_coverage")).fetchall()
        if lu or ju
    ]
